// The dead-man's switch of `rlock check`: whether a run of KEY succeeded within a window that
// ends now by the Redis server's clock, so that hosts with skewed clocks agree on the answer.
// The evidence is the key's run history (history.h), whose stream IDs are the server's clock
// when each run ended, and, for a --once-per job of the same period, the period's slot (which
// is all there is when the job runs with --history-length 0). Reads only: a check never
// writes to Redis.
#pragma once

#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "lock/history.h"
#include "redis/redis.h"
#include "util/error.h"
#include "util/period.h"

namespace rlock {

// Where the window starts for a check at server time NOW_MS: EVERY before it for a duration
// (the last 25h), or the start of the current calendar period (--once-per's, in TZ or UTC).
// NAME is the calendar period's name ("2026-11-30"), empty for a duration.
struct CheckWindow {
  int64_t start_ms = 0;
  std::string name;
};
CheckWindow check_window(const Period& every, const std::optional<std::string>& tz, int64_t now_ms);

// A run is what rlock run ended (exited, signalled, lost, max-run, hung); skip records
// (--record-skips: busy, done-this-period) and operator actions (entry_kind) are not. A success exited 0; a
// run whose end is unknown (settle_starts) is neither a success nor a failure.
bool is_run(const RunRecord& r);
bool is_success(const RunRecord& r);
bool end_unknown(const RunRecord& r);

// A run is every history entry of its fence: under --retry one per attempt, and the newest
// says how the run ended (its last attempt's end), or that it still runs (a start while its
// fence holds the lock: settle_starts). Told a history's entries newest first, this says which
// one stands for each run, so that every reader counts a run once, as its last attempt ended.
class RunsOnce {
public:
  // Whether an entry of the run with FENCE is the first told of that run (the others are its
  // older attempts). An entry without a fence (0) is a run of its own.
  bool first(int64_t fence) { return fence <= 0 || judged_.insert(fence).second; }
  // Whether R, the next entry (newest first, settled), says how a run ended: the first entry
  // of a run, not a start. Skips and resets are no runs; a run whose newest entry is a start
  // still runs, and none of its older attempts is its end.
  bool ended(const RunRecord& r) {
    return is_run(r) && first(r.fence) && r.end != run_end_name(RunEnd::running);
  }

private:
  std::unordered_set<int64_t> judged_;
};

// How many runs failed in a row before the run with FENCE (RUNS: a key's history, newest first,
// every host's, as read_history() gives it): the fleet's failures, which --notify counts. A
// run counts once, as it last ended (its last attempt, under --retry); skips, runs still going,
// runs whose end is unknown and runs that ended after FENCE's do not count. Without FENCE among
// RUNS, all of RUNS came before it.
int failures_before(const std::vector<RunRecord>& runs, int64_t fence);

// A run as the check saw it.
struct CheckedRun {
  RunRecord record;
  int64_t ended_ms = 0;      // the server's clock: the history entry's ID
  bool in_window = false;    // by the clock of the server that recorded it
  bool from_period = false;  // found in the --once-per period's slot, not in the history
};

struct CheckResult {
  int64_t now_ms = 0;  // the server's clock (the first that answered, under Redlock)
  CheckWindow window;
  std::optional<CheckedRun> last_success;  // the newest success seen, in the window or not
  std::optional<CheckedRun> last_run;      // the newest run, however it ended
  int runs_in_window = 0;
  int failures_in_window = 0;
  int unknown_in_window = 0;  // runs whose end is unknown: neither failed nor succeeded
  int entries_read = 0;  // history entries read, skips included: 0 means no history
  // Every entry in the window was read; false: only the newest 10,000 (a check stays cheap),
  // so the counts are of those, and the last success is the one kept beside the history.
  bool read_all = true;
  std::vector<Holder> running;          // who holds the lock now: the job is running
  std::vector<std::string> unanswered;  // Redlock nodes that did not answer (redacted names)
  // How many runs failed after the newest success (all of them without one), how many ended
  // unknown, and the newest ten of both, newest first: a check keeps no more of them
  // (docs/DESIGN.md, "Reads with a bound").
  int failures_since_count = 0;
  int unknown_since_count = 0;
  std::vector<CheckedRun> failures_since;
  // rlock pause (pause.h): no run is due while it lasts, so the check is no alarm.
  std::string pause;
  Millis pause_pttl{-2};

  // --slower-than: a success in the window that took longer than this is no success.
  std::optional<Millis> slower_than;

  bool paused() const { return !pause.empty(); }
  bool succeeded() const { return last_success && last_success->in_window; }
  // The last success took longer than --slower-than: the job still succeeds, but has crept.
  bool slow() const {
    return succeeded() && slower_than && Millis(last_success->record.held_ms) > *slower_than;
  }
  bool ok() const { return (succeeded() && !slow()) || paused(); }
};

// One node's history as a check counts it, told its entries newest first: a mark of a few bytes
// for each run, as its newest entry says (RunsOnce), and the few runs a check shows (the newest,
// the newest success, the newest failures before it), not every entry told: 10,000 entries of
// another program's may each be large (docs/DESIGN.md, "Reads with a bound").
class RunTally {
public:
  // Runs that ended from WINDOW_START_MS on (the node's clock) are in the window.
  explicit RunTally(int64_t window_start_ms) : window_start_ms_(window_start_ms) {}
  // ENTRY, the next of the history, newest first, its start settled (settle_starts).
  void add(RunRecord entry);
  // The kept last success (KEYS[3] of history_add.lua), unless the entries told had its run.
  void add_kept_success(RunRecord run);

private:
  friend void count_runs(std::vector<RunTally>& tallies, CheckResult& out);
  // A run, as the counts need it.
  enum class Verdict { success, failure, unknown };
  struct Mark {
    int64_t ended_ms = 0;
    int64_t seq = 0;    // the entry ID's sequence number, which orders runs of the same ms
    int64_t fence = 0;  // the run's: under Redlock its attempts may be on two nodes
    Verdict verdict = Verdict::failure;
    bool in_window = false;
  };
  int64_t window_start_ms_;
  RunsOnce runs_;               // the runs told, so that each is marked once
  std::vector<Mark> marks_;     // newest first
  std::vector<int64_t> going_;  // the fences of runs still going: an attempt of theirs runs
  std::optional<CheckedRun> newest_;
  std::optional<CheckedRun> newest_success_;
  // Failed or unknown, before newest_success_, newest first, a few.
  std::vector<CheckedRun> newest_failures_;
};

// OUT's runs in the window and their failures, the failures since the last success and the
// runs it names, from every node's TALLIES (under Redlock each run's entries are on the nodes
// that first answered their writer): each run once, as its newest entry of all says, none
// that still runs.
void count_runs(std::vector<RunTally>& tallies, CheckResult& out);

// Reads what KEY's history (every node's, under Redlock), its lock and, when the history has no
// success in the window, the period's slot say. A failure: no Redis answered.
Result<CheckResult> check_runs(Redis& redis, const std::string& key, const Period& every,
                               const std::optional<std::string>& tz, TimePoint deadline);

}  // namespace rlock
