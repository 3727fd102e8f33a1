// Cron-grade memory of a lock: the period slots of --once-per, and the run history.
//
// Keys of lock KEY (in KEY's hash slot, like the lock's other helpers; lock.h):
//   {KEY}:rlock:once:SLOT   who ran the job in period SLOT ("2026-11-30", "2026-W49" ...) and how
//                           it ended: a hash, expiring a margin after the period ends
//   {KEY}:rlock:history     one entry per run, newest last: a stream capped at --history-length.
//                           A run's entry is written when it takes the lock (or claims its
//                           period), end=running, and replaced by its end: a run whose rlock
//                           died keeps its start, read as "running" while its fence holds the
//                           lock and as unknown ("end unknown") once it does not. Entries
//                           of older rlocks are ends only. Under --retry each attempt is an
//                           entry of the run's fence: a run is every entry of its fence, and
//                           its newest says how it ended (RunsOnce in check.h).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lock/lock.h"
#include "lock/lock_value.h"
#include "redis/redis.h"
#include "util/duration.h"
#include "util/error.h"
#include "util/period.h"

namespace rlock {

// How a run ended: the one value from run's supervisor to the history, the metrics, --notify,
// check and rlock's exit status (k_run_ends in history.cpp gives each its words and status;
// adding an end adds a row there). The history also records what is no run (EntryKind): the
// runs that did not happen (busy, paused, done_this_period, with --record-skips) and an
// operator's actions (pause, resume, period_reset, forced_release: who, when and why).
// running is a run's start entry; unknown is what readers make of one
// whose fence no longer holds the lock (settle_starts): its rlock died, or Redis could not be
// reached to record its end, and nobody knows how the command ended: neither a success nor a
// failure for check and --notify's count.
enum class RunEnd {
  exited,
  signalled,
  lost,
  broken,
  max_run,
  hung,
  stopped,
  busy,
  paused,
  done_this_period,
  pause,
  resume,
  period_reset,
  forced_release,
  running,
  unknown
};
// What a history entry is: a run (also one it does not know: another version's end), a run
// that did not happen, or an operator's action.
enum class EntryKind { run, skip, action };
EntryKind entry_kind(std::string_view end);
// As the history, JSON and watch name END.
const char* run_end_name(RunEnd end);
// As RLOCK_RESULT names a run that ended as END with rlock's exit status STATUS: success,
// failure, lost, hung, max-run, stopped when the command ran; busy or done when it did not.
const char* run_result_name(RunEnd end, int status);
// As the metrics file labels it (rlock_runs_total's end): the result, but signalled by its own
// name.
const char* run_end_label(RunEnd end, int status);
// rlock's exit status for a run that ended as END: the command's own STATUS when it ended by
// itself (exited, signalled), CONFLICT (--conflict-exit-code) when it did not run.
int run_end_exit_status(RunEnd end, int status, int conflict);

struct RunRecord {
  std::string id;  // the stream entry's ID (when read back)
  Holder holder;   // host, pid, user, command, and since = when the lock was taken
  int64_t fence = 0;
  int64_t waited_ms = 0;
  int64_t held_ms = 0;
  int exit_status = 0;
  std::string end;     // run_end_name(), or what another version wrote
  std::string period;  // the --once-per slot, if any
  // Who ended the run, and why: rlock stop's asker (stopped), release --force's (broken), the
  // pause that kept it out (paused, with --record-skips).
  std::string by;      // USER@HOST
  std::string reason;  // --reason, or empty
  std::string until;   // a pause's end (RFC 3339, the server's clock), or empty
  // What the command cost (Child::Usage: it and the processes it started); -1: not known (no
  // command ran, or an rlock that did not record it).
  int64_t cpu_user_ms = -1;
  int64_t cpu_sys_ms = -1;
  int64_t max_rss_kb = -1;
  int attempt = 0;    // --retry: which attempt of the run this is (1, 2 ...); 0: no --retry
  std::string token;  // the run's own (not recorded): an entry sent again finds the first by it
  std::string start;  // the ID of the run's start entry, which its end replaces (not recorded)
  // --retry: when the attempt began by the server's clock (the first when the lock was taken)
  // and how long it ran, for `history` to show each attempt's own span where since and held_ms
  // are the run's. -1: not recorded (no --retry, a start entry, or an older rlock's entry).
  WallTime attempt_since{};
  int64_t attempt_held_ms = -1;

  // Whether the entry says how the run ended: not a start (running, or end unknown).
  bool ended() const;
  // Whether the entry has its attempt's own start and length (attempt_since, attempt_held_ms).
  bool attempt_span_known() const { return attempt_held_ms >= 0 && attempt_since != WallTime{}; }
};

// A history entry for a run that did not happen (--record-skips): END says why, STATUS is what
// rlock exits with; timed by the server when it is recorded.
RunRecord skipped_run(const Holder& holder, const std::string& token, RunEnd end, int status);

// A history entry for an operator's ACTION (pause, resume, period_reset, forced_release) by
// this process's user and host, with REASON; timed by the server when it is recorded.
RunRecord action_entry(RunEnd action, const std::string& reason);
// Records ENTRY (action_entry()) in KEY's history when HISTORY_LENGTH allows: one warning if it
// cannot be, never the action's failure.
void record_action(Redis& redis, const std::string& key, const RunRecord& entry,
                   int history_length, Millis retention);

// The fields of a run's start entry (StartRecord in lock.h) for HOLDER, and PERIOD if any.
Argv start_fields(const Holder& holder, const std::string& period = "");

// Judges the start entries among RUNS (read from one server): a run whose fence is not among
// HELD (the fences of that server's holders now) has ended without saying how: unknown.
void settle_starts(std::vector<RunRecord>& runs, const std::vector<int64_t>& held);
// The fences of the holders of KEY in VALUES: replies to history_holders_reads() (lock values).
std::vector<int64_t> fences_in_values(const std::vector<Reply>& values);
// The most holders' values read of a semaphore or a shared lock (HSCAN's COUNT) when a
// history is read: as many as lock_state.h's k_places_read_most.
inline constexpr int k_holders_read_most = 1000;
// The reads that give fences_in_values() its replies: the lock's value's first bytes, a
// semaphore's and a shared lock's places' values.
std::vector<Argv> history_holders_reads(const std::string& key);

// The result of claiming this period's slot.
struct SlotClaim {
  bool claimed = false;
  std::string start;  // when claimed: the ID of the run's start entry in the history, or
  // When not claimed: who had it, and how it went ("running" when that run never said).
  std::string host, since, state, status, end;
};

// How the run in a period's slot ended, for people: "it succeeded", "it exited with status 3",
// "it never reported its end (lost)" ...
std::string period_run_text(const SlotClaim& run);
// Why a --once-per run does not run: who ran it in SLOT, how that went, and what would let it
// run again (with --retry-failed or not).
std::string period_done_text(const SlotClaim& run, const std::string& slot, bool retry_failed);

class PeriodGuard {
public:
  PeriodGuard(Redis& redis, const std::string& key, Period period, std::optional<std::string> tz,
              bool retry_failed)
      : redis_(redis), key_(key), period_(period), tz_(std::move(tz)), retry_failed_(retry_failed) {
  }

  // Claims the current period's slot for HOLDER (we hold the lock, so nobody else runs it
  // now), recording the run's START in the history (max_length 0: not). Not claimed: an
  // earlier run had it, and (without --retry-failed, or when it succeeded) the job must not
  // run again this period.
  Result<SlotClaim> claim(const Holder& holder, int64_t fence, const StartRecord& start,
                          TimePoint deadline);
  // Without the lock (before trying it): the run this period already had, when it has ended and
  // keeps the job from running again (as claim() would say); nothing while it runs, when the
  // slot is free, or when --retry-failed would run a failed one again. Reads only.
  Result<std::optional<SlotClaim>> finished_run(TimePoint deadline);
  // Records how our run ended in the slot we claimed, through ON (the lock's connection may be
  // the renewal thread's).
  Result<Unit> record_end(Redis& on, const RunRecord& record, TimePoint deadline);
  const std::string& slot_name() const { return slot_.name; }

private:
  Redis& redis_;
  std::string key_;
  Period period_;
  std::optional<std::string> tz_;
  bool retry_failed_;
  PeriodSlot slot_;
  int64_t fence_ = 0;
};

// What `rlock reset-period` found in the current period's slot of KEY.
struct PeriodReset {
  enum class Outcome { forgotten, no_run, still_running } outcome = Outcome::no_run;
  std::string slot;  // the period's name: "2026-11-30", "2026-W49" ...
  SlotClaim run;     // the period's run (forgotten, or still running): who, when, how it ended
};
// Forgets the current period's run of KEY (by the server's clock), unless that run still
// holds the lock, so that the next `rlock run --once-per` runs the job again.
Result<PeriodReset> reset_period(Redis& redis, const std::string& key, const Period& period,
                                 const std::optional<std::string>& tz, TimePoint deadline);

// The script that appends RECORD to KEY's history, capped near MAX_LENGTH entries, and keeps
// the history RETENTION after this use (0: for ever). It may be sent again until answered:
// RECORD's token finds an entry already made (history_add.lua). A failure to write it never
// fails the job: the caller turns it into one warning.
ScriptCall history_entry(const std::string& key, const RunRecord& record, int max_length,
                         Millis retention);
// The script that records the start of ATTEMPT (2, 3 ...) of the run with FENCE by HOLDER
// (--retry), as it begins; its reply is the entry's ID, which the attempt's end replaces
// (history_start.lua). Sent again until answered: it finds the first delivery.
ScriptCall attempt_start(const std::string& key, const Holder& holder, int64_t fence, int attempt,
                         int max_length, Millis retention);
// What finds a history entry sent again (history_add.lua): the run's TOKEN, and under --retry
// the number of its ATTEMPT from the second on.
std::string entry_token(const std::string& token, int attempt);
// The script that removes the start entry START of the run with TOKEN: the lock was taken, but
// the command never started (history_add.lua).
ScriptCall history_forget(const std::string& key, const std::string& token,
                          const std::string& start);
// The latest COUNT runs of KEY, newest first. Under Redlock each run's entry went to one node
// (the first that answered its writer), so every node is read; those that did not answer are
// named in UNANSWERED (a failure when none did).
struct HistoryRead {
  std::vector<RunRecord> runs;
  std::vector<std::string> unanswered;
};
Result<HistoryRead> read_history(Redis& redis, const std::string& key, int count,
                                 TimePoint deadline);
// The most runs `rlock history --count` shows, and entries `--history-length` keeps: 10 million
// (docs/DESIGN.md, "Reads with a bound").
inline constexpr int k_history_most_runs = 9999999;
// The latest COUNT runs of KEY, newest first, as read_history() gives them, but read a page at
// a time (k_history_page_runs entries of each node) and handed to EACH page by page, so that
// memory holds a page, not the whole range. Nodes that did not answer are in the result. The
// first page is due by FIRST_DEADLINE, each later one a command timeout after it is asked.
inline constexpr int k_history_page_runs = 500;
Result<std::vector<std::string>>
page_history(Redis& redis, const std::string& key, int count, TimePoint deadline,
             const std::function<void(const std::vector<RunRecord>&)>& each);
// The ID just before ID ("1700000000000-0" gives "1699999999999-18446744073709551615"), for
// the next page of an XREVRANGE (whose exclusive "(" needs Redis 6.2); empty before the first
// possible ID.
std::string history_id_before(const std::string& id);
// The time in a stream entry's ID ("1700000000000-3"): the server's clock when it was added.
int64_t history_entry_ms(const std::string& id);
// A stream entry's fields (XRANGE's reply element) as a RunRecord.
std::optional<RunRecord> decode_history_entry(const Reply& entry);

}  // namespace rlock
