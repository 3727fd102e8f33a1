#include <doctest/doctest.h>

#include "lock/check.h"

using namespace rlock;

TEST_CASE("check_window: the last PERIOD, or the current calendar period") {
  constexpr int64_t now = 1796167800000;  // 2026-12-01T23:30:00Z
  CheckWindow last = check_window(*parse_period("25h"), std::nullopt, now);
  CHECK(last.start_ms == now - 25 * 3600 * 1000);
  CHECK(last.name.empty());
  // A duration is a sliding window, not --once-per's window from the epoch.
  CHECK(check_window(*parse_period("1d"), std::nullopt, now).start_ms == now - 86400 * 1000);
  CheckWindow utc = check_window(*parse_period("day"), std::nullopt, now);
  CHECK(utc.name == "2026-12-01");
  CHECK(utc.start_ms == 1796083200000);
  // In Berlin it is already the 2nd, since 23:00Z.
  CheckWindow berlin = check_window(*parse_period("day"), "Europe/Berlin", now);
  CHECK(berlin.name == "2026-12-02");
  CHECK(berlin.start_ms == 1796166000000);
}

TEST_CASE("a success exited 0; skips and resets are no runs") {
  RunRecord r;
  r.end = "exited";
  CHECK(is_run(r));
  CHECK(is_success(r));
  r.exit_status = 3;
  CHECK(!is_success(r));
  r.end = "signalled";
  r.exit_status = 0;  // whatever a record says, a signalled run did not succeed
  CHECK(!is_success(r));
  for (const char* skip : {"busy", "done-this-period", "period-reset"}) {
    r.end = skip;
    CHECK_MESSAGE(!is_run(r), skip);
  }
}
