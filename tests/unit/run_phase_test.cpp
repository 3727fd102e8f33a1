// A run's phase (run_phase.h): its text as the renew script stores it, read back, and shown.
#include <doctest/doctest.h>

#include "lock/run_phase.h"
#include "print/lock_view.h"
#include "print/print_phase.h"

using namespace rlock;

namespace {

// As the renew script stores TEXT: the server's times first.
std::string stored(const std::string& text, int64_t since, int64_t due) {
  return "since=" + std::to_string(since) + " due=" + std::to_string(due) + " " + text;
}

RunPhase stop_by_alice() {
  RunPhase p;
  p.kind = RunPhase::Kind::stopping;
  p.why = "stopped";
  p.signal = "TERM";
  p.by = "alice@ops-1";
  p.reason = "db maintenance = 100% done";
  return p;
}

}  // namespace

TEST_CASE("a stop's phase is stored and read back, its reason escaped") {
  std::string text = encode_run_phase(stop_by_alice());
  CHECK(text == "stopping why=stopped signal=TERM by=alice@ops-1 "
                "reason=db%20maintenance%20%3d%20100%25%20done");
  auto back = decode_run_phase(stored(text, 1000, 31000));
  REQUIRE(back);
  CHECK(back->phase.kind == RunPhase::Kind::stopping);
  CHECK(back->phase.by == "alice@ops-1");
  CHECK(back->phase.reason == "db maintenance = 100% done");
  CHECK(back->since_ms == 1000);
  CHECK(back->due_ms == 31000);
}

TEST_CASE("a pending retry's phase is stored and read back") {
  RunPhase p;
  p.kind = RunPhase::Kind::retrying;
  p.attempt = 2;
  p.attempts = 4;
  p.last_status = 1;
  std::string text = encode_run_phase(p);
  CHECK(text == "retrying attempt=2 attempts=4 status=1");
  auto back = decode_run_phase(stored(text, 5, 20005));
  REQUIRE(back);
  CHECK(back->phase.attempt == 2);
  CHECK(back->phase.attempts == 4);
  CHECK(back->phase.last_status == 1);
}

TEST_CASE("what is not a phase is not read as one") {
  CHECK(!decode_run_phase(""));
  CHECK(!decode_run_phase("stopping why=stopped"));  // no times: not the script's
  CHECK(!decode_run_phase("since=1 due=2 dancing"));
  CHECK(!decode_run_phase("since=x due=2 stopping"));
  CHECK(!decode_run_phase("since=1 due=2 retrying attempt=two"));
  CHECK(!decode_run_phase("since=1 due=2 stopping by=%zz"));
  // A later rlock's field is passed over.
  CHECK(decode_run_phase("since=1 due=2 stopping grace=5"));
}

TEST_CASE("a phase is shown by the server's clock") {
  auto stop = decode_run_phase(stored(encode_run_phase(stop_by_alice()), 10000, 40000));
  REQUIRE(stop);
  PhaseView v = view_phase(*stop, 13000);
  CHECK(v.ago == Millis(3000));
  CHECK(v.due_in == Millis(27000));
  CHECK(phase_text(v) == "stopping: SIGTERM sent 3s ago by alice@ops-1 (db maintenance = 100% "
                         "done), SIGKILL in 27s");
  CHECK(phase_text(view_phase(*stop, 41000)).ends_with("SIGKILL due 1s ago"));

  RunPhase lost;
  lost.kind = RunPhase::Kind::stopping;
  lost.why = "max-run";
  lost.signal = "INT";
  auto max_run = decode_run_phase(stored(encode_run_phase(lost), 1, 6001));
  REQUIRE(max_run);
  CHECK(phase_text(view_phase(*max_run, 1001)) ==
        "stopping (max-run): SIGINT sent 1s ago, SIGKILL in 5s");

  auto retry = decode_run_phase(stored("retrying attempt=2 attempts=4 status=3", 100, 10100));
  REQUIRE(retry);
  CHECK(phase_text(view_phase(*retry, 100)) ==
        "retrying: attempt 2 of 4 in 10s, attempt 1 exited 3");
}
