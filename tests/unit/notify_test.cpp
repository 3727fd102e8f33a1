// What --notify tells and --retry retries: the fleet's failures in a history, the decision,
// the delays, and the settings' values.
#include <doctest/doctest.h>
#include <string>
#include <tuple>

#include "lock/check.h"
#include "run/notify.h"
#include "run/records.h"
#include "settings/settings.h"
#include "util/error.h"

using namespace rlock;
using namespace std::chrono_literals;

namespace {

RunRecord run(int64_t fence, const char* end, int status, int attempt = 0) {
  RunRecord r;
  r.fence = fence;
  r.end = end;
  r.exit_status = status;
  r.attempt = attempt;
  return r;
}

RunOptions notify_options(RunOptions::NotifyOn on, int after) {
  RunOptions o;
  o.notify = "true";
  o.notify_on = on;
  o.notify_after = after;
  return o;
}

Resolved resolved(std::initializer_list<std::pair<const char*, const char*>> items) {
  RawSettings s = default_settings();
  for (auto [name, value] : items)
    s[name] = RawValue{{value}, {Origin::Kind::flag, std::string("--") + name}};
  return resolve_settings(s);
}

}  // namespace

TEST_CASE("failures_before: the fleet's failures in a row before a run, each run once") {
  // Newest first: our run (fence 9), then a run of two attempts that ended in failure, a skip,
  // a lost run, a run still going, a run whose end is unknown (its rlock died), then a success.
  std::vector<RunRecord> runs{run(9, "exited", 3),  run(8, "exited", 1, 2), run(8, "exited", 1, 1),
                              run(0, "busy", 75),   run(7, "lost", 76),     run(6, "running", 0),
                              run(5, "unknown", 0), run(4, "exited", 0),    run(3, "exited", 2)};
  CHECK(failures_before(runs, 9) == 2);  // 8 and 7: 5 neither failed nor succeeded
  // A run that ended after ours does not count; a run absent (its entry not written) counts
  // all it finds.
  CHECK(failures_before(runs, 8) == 1);
  CHECK(failures_before(runs, 42) == 3);
  // An attempt that succeeded makes its run a success, whatever attempts came before it.
  std::vector<RunRecord> retried{run(9, "exited", 1), run(8, "exited", 0, 2),
                                 run(8, "exited", 1, 1), run(7, "exited", 1)};
  CHECK(failures_before(retried, 9) == 0);
  CHECK(failures_before({}, 9) == 0);
}

TEST_CASE("worth_telling: failure, change and always, from the Nth failure in a row") {
  using On = RunOptions::NotifyOn;
  RunOptions failure = notify_options(On::failure, 1);
  CHECK(worth_telling(failure, "failure", 0));
  CHECK(worth_telling(failure, "lost", 5));
  CHECK(!worth_telling(failure, "success", 3));
  CHECK(!worth_telling(failure, "busy", 0));
  RunOptions third = notify_options(On::failure, 3);
  CHECK(!worth_telling(third, "failure", 1));
  CHECK(worth_telling(third, "failure", 2));
  CHECK(worth_telling(third, "stopped", 3));
  // change: the streak's Nth failure, and the first success after at least N.
  RunOptions change = notify_options(On::change, 2);
  CHECK(!worth_telling(change, "failure", 0));
  CHECK(worth_telling(change, "failure", 1));
  CHECK(!worth_telling(change, "failure", 2));
  CHECK(worth_telling(change, "success", 2));
  CHECK(worth_telling(change, "success", 7));
  CHECK(!worth_telling(change, "success", 1));
  CHECK(!worth_telling(change, "done", 9));
  RunOptions always = notify_options(On::always, 3);
  for (const char* r : {"success", "failure", "busy", "done", "error"})
    CHECK(worth_telling(always, r, 0));
  // The count unknown (the history could not be read): only what needs none.
  CHECK(worth_telling(failure, "failure", std::nullopt));
  CHECK(!worth_telling(third, "failure", std::nullopt));
  CHECK(!worth_telling(change, "failure", std::nullopt));
  CHECK(!worth_telling(change, "success", std::nullopt));
  CHECK(worth_telling(always, "success", std::nullopt));
}

TEST_CASE("RunReport::result: what RLOCK_RESULT says") {
  RunReport r;
  CHECK(r.result() == "error");  // the lock could not be had, or the command never started
  for (auto [end, status, result] : {std::tuple{RunEnd::busy, 75, "busy"},
                                     {RunEnd::paused, 75, "busy"},
                                     {RunEnd::done_this_period, 75, "done"},
                                     {RunEnd::exited, 0, "success"},
                                     {RunEnd::exited, 3, "failure"},
                                     {RunEnd::signalled, 143, "failure"},
                                     {RunEnd::broken, 76, "lost"},
                                     {RunEnd::max_run, 124, "max-run"},
                                     {RunEnd::stopped, 80, "stopped"}}) {
    r.end = end;
    r.exit_status = status;
    CHECK(r.result() == result);
  }
}

TEST_CASE("every end has its words and its exit status") {
  for (RunEnd end :
       {RunEnd::exited, RunEnd::signalled, RunEnd::lost, RunEnd::broken, RunEnd::max_run,
        RunEnd::hung, RunEnd::stopped, RunEnd::busy, RunEnd::paused, RunEnd::done_this_period,
        RunEnd::period_reset, RunEnd::running, RunEnd::unknown}) {
    CAPTURE(static_cast<int>(end));
    CHECK((end == RunEnd::exited) == (std::string(run_end_name(end)) == "exited"));
  }
  CHECK(run_end_exit_status(RunEnd::exited, 3, 75) == 3);
  CHECK(run_end_exit_status(RunEnd::busy, 0, 9) == 9);
  CHECK(run_end_exit_status(RunEnd::lost, 0, 75) == 76);
  CHECK(run_end_exit_status(RunEnd::hung, 0, 75) == 79);
  CHECK(std::string(run_end_label(RunEnd::signalled, 143)) == "signalled");
  CHECK(std::string(run_end_label(RunEnd::broken, 76)) == "lost");
}

TEST_CASE("retries: which statuses, and the delays that double up to an hour") {
  RunOptions o;
  CHECK(worth_another_attempt(o, 1));
  CHECK(worth_another_attempt(o, 137));
  CHECK(!worth_another_attempt(o, 0));
  o.retry_on = {3, 5, 6};
  CHECK(worth_another_attempt(o, 5));
  CHECK(!worth_another_attempt(o, 4));
  o.retry_delay = 1s;
  CHECK(retry_delay(o, 1) == 1s);
  CHECK(retry_delay(o, 2) == 2s);
  CHECK(retry_delay(o, 4) == 8s);
  CHECK(retry_delay(o, 40) == 1h);
  o.retry_delay = 0s;
  CHECK(retry_delay(o, 5) == 0s);
}

TEST_CASE("set_attempt_span: an attempt's own start and length, by the run's since") {
  RunRecord r;
  r.holder.since = WallTime(Millis(1796539471026));  // the server's clock at the lock's taking
  TimePoint sent = TimePoint(std::chrono::seconds(50));
  // The first attempt starts when the lock was taken.
  set_attempt_span(r, sent, sent, sent + 1200ms);
  CHECK(r.attempt_since == r.holder.since);
  CHECK(r.attempt_held_ms == 1200);
  // A later one from its own start: 2.5 s into the run, for 300 ms.
  set_attempt_span(r, sent, sent + 2500ms, sent + 2800ms);
  CHECK(r.attempt_since == r.holder.since + Millis(2500));
  CHECK(r.attempt_held_ms == 300);
  CHECK(r.attempt_span_known());
  CHECK(!RunRecord{}.attempt_span_known());  // an older rlock's entry: the run's times
}

TEST_CASE("the settings of --retry and --notify") {
  Resolved r = resolved({{"retry", "2"},
                         {"retry-on", "1, 75,3-5,4"},
                         {"notify", "true"},
                         {"notify-on", "change"},
                         {"notify-after", "3"}});
  CHECK(r.run.retry == 2);
  CHECK(r.run.retry_on == std::vector<int>{1, 3, 4, 5, 75});
  CHECK(r.run.notify_on == RunOptions::NotifyOn::change);
  CHECK(r.run.notify_after == 3);
  CHECK(r.run.notify_timeout == 10s);
  CHECK(resolved({}).run.retry_delay == 1s);
  try {
    resolved({{"notify-on", "sometimes"}});
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "--notify-on: 'sometimes' is not failure, change or always");
  }
  try {
    resolved({{"retry-on", "0"}, {"retry", "1"}});
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).starts_with("--retry-on: '0' is not a list of exit statuses"));
  }
  try {
    resolved({{"notify-after", "2"}});
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "--notify-after: needs --notify CMD: what to run");
  }
}
