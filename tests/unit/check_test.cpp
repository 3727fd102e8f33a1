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

TEST_CASE("a success exited 0; skips and operator actions are no runs") {
  RunRecord r;
  r.end = "exited";
  CHECK(is_run(r));
  CHECK(is_success(r));
  r.exit_status = 3;
  CHECK(!is_success(r));
  r.end = "signalled";
  r.exit_status = 0;  // whatever a record says, a signalled run did not succeed
  CHECK(!is_success(r));
  for (const char* skip : {"busy", "paused", "done-this-period", "period-reset", "pause", "resume",
                           "forced-release"}) {
    r.end = skip;
    CHECK_MESSAGE(!is_run(r), skip);
  }
  // A run's end unknown is a run, neither a success nor a failure; an end another version
  // wrote is a run.
  for (const char* run : {"unknown", "evicted-by-v9"}) {
    r.end = run;
    CHECK_MESSAGE(is_run(r), run);
  }
  r.end = "unknown";
  CHECK((end_unknown(r) && !is_success(r)));
}

namespace {

// A history entry of the run with FENCE that the server recorded at MS (its stream ID).
RunRecord entry(int64_t ms, int64_t fence, const char* end, int status, int attempt = 0) {
  RunRecord r;
  r.id = std::to_string(ms) + "-0";
  r.fence = fence;
  r.end = end;
  r.exit_status = status;
  r.attempt = attempt;
  return r;
}

// What a check counts of NODES' histories (each newest first) with a window from WINDOW_START.
CheckResult counted(const std::vector<std::vector<RunRecord>>& nodes, int64_t window_start = 0) {
  std::vector<RunTally> tallies;
  for (const auto& node : nodes) {
    RunTally& t = tallies.emplace_back(window_start);
    for (const RunRecord& e : node) t.add(e);
  }
  CheckResult out;
  count_runs(tallies, out);
  return out;
}

}  // namespace

TEST_CASE("count_runs: a run is counted once, as its last attempt ended") {
  SUBCASE("four attempts that failed are one failed run") {
    CheckResult r = counted({{entry(4000, 7, "exited", 3, 4), entry(3000, 7, "exited", 3, 3),
                              entry(2000, 7, "exited", 3, 2), entry(1000, 7, "exited", 3, 1)}});
    CHECK(r.runs_in_window == 1);
    CHECK(r.failures_in_window == 1);
    CHECK(r.failures_since_count == 1);
    REQUIRE(r.failures_since.size() == 1);
    CHECK(r.failures_since[0].record.attempt == 4);
    REQUIRE(r.last_run);
    CHECK(r.last_run->record.attempt == 4);
    CHECK(!r.last_success);
  }
  SUBCASE("a run that succeeded on its third attempt is a success, not two failures") {
    CheckResult r = counted({{entry(4000, 7, "exited", 0, 3), entry(3000, 7, "exited", 1, 2),
                              entry(2000, 7, "exited", 1, 1), entry(1000, 5, "exited", 0)}});
    CHECK(r.runs_in_window == 2);
    CHECK(r.failures_in_window == 0);
    CHECK(r.failures_since_count == 0);
    CHECK(r.failures_since.empty());
    REQUIRE(r.last_success);
    CHECK(r.last_success->record.fence == 7);
  }
  SUBCASE("two runs, each retried, are two runs") {
    CheckResult r = counted({{entry(5000, 9, "exited", 2, 2), entry(4000, 9, "exited", 2, 1),
                              entry(3000, 7, "exited", 1, 3), entry(2000, 7, "exited", 1, 2),
                              entry(1000, 7, "exited", 1, 1)}});
    CHECK(r.runs_in_window == 2);
    CHECK(r.failures_in_window == 2);
    CHECK(r.failures_since_count == 2);
    REQUIRE(r.failures_since.size() == 2);
    CHECK(r.failures_since[0].record.fence == 9);
    CHECK(r.failures_since[1].record.fence == 7);
  }
  SUBCASE("a run is in the window when its last attempt ended there") {
    CheckResult r = counted({{entry(3000, 7, "exited", 1, 2), entry(1000, 7, "exited", 1, 1),
                              entry(500, 5, "exited", 1)}},
                            2000);
    CHECK(r.runs_in_window == 1);
    CHECK(r.failures_in_window == 1);
    CHECK(r.failures_since_count == 2);
  }
  SUBCASE("a run whose attempt runs now counts for nothing, its ended attempts neither") {
    CheckResult r = counted({{entry(3000, 9, "running", 0, 2), entry(2000, 9, "exited", 1, 1),
                              entry(1000, 7, "exited", 0)}});
    CHECK(r.runs_in_window == 1);
    CHECK(r.failures_in_window == 0);
    CHECK(r.failures_since_count == 0);
    REQUIRE(r.last_run);
    CHECK(r.last_run->record.fence == 7);
  }
  SUBCASE("under Redlock a run's attempts on two nodes are one run") {
    CheckResult success =
        counted({{entry(1000, 9, "exited", 1, 1)}, {entry(2000, 9, "exited", 0, 2)}});
    CHECK(success.runs_in_window == 1);
    CHECK(success.failures_in_window == 0);
    CHECK(success.failures_since_count == 0);
    CHECK(success.failures_since.empty());
    CheckResult failed =
        counted({{entry(2000, 9, "exited", 1, 2)}, {entry(1000, 9, "exited", 1, 1)}});
    CHECK(failed.runs_in_window == 1);
    CHECK(failed.failures_since.size() == 1);
    CHECK(failed.failures_since[0].record.attempt == 2);
    CheckResult going =
        counted({{entry(1000, 9, "exited", 1, 1)}, {entry(2000, 9, "running", 0, 2)}});
    CHECK(going.runs_in_window == 0);
    CHECK(going.failures_since_count == 0);
    CHECK(!going.last_run);
  }
  SUBCASE("a run whose end is unknown counts in the window, as neither failure nor success") {
    CheckResult r = counted({{entry(4000, 9, "unknown", 0), entry(3000, 8, "exited", 3),
                              entry(2000, 7, "exited", 0), entry(1000, 6, "unknown", 0)}});
    CHECK(r.runs_in_window == 4);
    CHECK(r.failures_in_window == 1);
    CHECK(r.unknown_in_window == 2);
    CHECK(r.failures_since_count == 1);
    CHECK(r.unknown_since_count == 1);
    REQUIRE(r.failures_since.size() == 2);  // both named, newest first
    CHECK(r.failures_since[0].record.fence == 9);
    REQUIRE(r.last_success);
    CHECK(r.last_success->record.fence == 7);
  }
  SUBCASE("runs without --retry are one entry each, as before") {
    CheckResult r = counted({{entry(3000, 9, "exited", 0), entry(2000, 8, "lost", 76),
                              entry(1500, 0, "busy", 75), entry(1000, 7, "exited", 3)}});
    CHECK(r.runs_in_window == 3);
    CHECK(r.failures_in_window == 2);
    CHECK(r.failures_since_count == 0);
  }
}

TEST_CASE("failures_before: a run still going is no failure, its ended attempts neither") {
  // Newest first: ours (fence 10), a semaphore's run whose second attempt runs, a success.
  std::vector<RunRecord> runs{entry(4000, 10, "exited", 1), entry(3000, 9, "running", 0, 2),
                              entry(2000, 9, "exited", 1, 1), entry(1000, 8, "exited", 0)};
  CHECK(failures_before(runs, 10) == 0);
}
