// The parts of rlock run that are not its story (run.cpp tells that): the command line it
// runs, the refusal of a command that cannot run, a lease fresh enough to start on, the nested
// run, the history entry of a run that did not happen, and the metrics file.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lock/history.h"
#include "output/metrics.h"
#include "process/child.h"
#include "settings/settings.h"
#include "util/clock.h"
#include "verbs/run_supervisor.h"
#include "verbs/wait.h"

namespace rlock {

class HeldLock;
class Lock;
class Redis;

// Adds this run to --metrics-file when rlock is done with it, on every path out of run_verb,
// after the release. A file that cannot be written is a warning: metrics never fail the job,
// nor hold rlock (a frozen file system: bounded_call.h).
struct MetricsRecorder {
  explicit MetricsRecorder(const RunOptions& options);
  ~MetricsRecorder();
  MetricsRecorder(const MetricsRecorder&) = delete;
  MetricsRecorder& operator=(const MetricsRecorder&) = delete;
  std::optional<std::string> path;
  RunMetrics m;
  std::optional<TimePoint> acquired;
  // Adds what the command (or an attempt of it) cost, as its record R says.
  void add_cost(const RunRecord& r);
  // The run ended as END, recorded as R; its cost is added too unless COST is false (counted
  // already).
  void run_ended(RunEnd end, const RunRecord& r, bool cost);
};

// Says that the lock was taken, with FENCE, after waiting WAITED: on stderr when it waited,
// else with -v.
void log_acquired(const RunOptions& options, int64_t fence, Millis waited);

// A lock lost to release --force: RECORD is made the record of a broken run, by whom and why,
// as the tombstone in its place says (one read, on this rare way out only). False when no
// tombstone says so (the key was deleted, or taken by another token).
bool record_breaker(Lock& lock, RunRecord& record);

// --record-skips: a run of HOLDER (with TOKEN) kept out by a holder or by a pause (who
// paused, and why), which exits with STATUS.
void record_skip(Redis& redis, const RunOptions& options, const Holder& holder,
                 const std::string& token, const NotObtained& busy, int status);

// The command to start: COMMAND, or $SHELL -c TEXT.
std::vector<std::string> command_argv(const RunOptions& options);

// The start of ARGV (found at PROGRAM; empty: searched) under the lock with TOKEN and FENCE:
// the lock's environment (RLOCK_KEY ...; RLOCK_ATTEMPT=1 with --retry), none of rlock's Redis
// secrets.
Child::Spec command_spec(const RunOptions& options, const std::vector<std::string>& argv,
                         const std::string& program, const std::string& token, int64_t fence);
// --retry: SPEC's RLOCK_ATTEMPT made N.
void set_attempt(Child::Spec& spec, int n);
// What keeps rlock's Redis secrets from a process it starts: RLOCK_PASSWORD unset, the password
// of RLOCK_REDIS_URL left out; REDISCLI_AUTH too, unless KEEP_REDISCLI_AUTH (redis-cli's own,
// which a job may use for its own Redis).
void keep_secrets(std::vector<std::string>& env, std::vector<std::string>& unset,
                  bool keep_rediscli_auth);

// The name that goes into the lock value and the history: the program, never its arguments nor
// an assignment (`PGPASSWORD=... psql` is psql).
std::string command_name(const RunOptions& options);

// A command that cannot run must not take the lock (and a typo must not keep others out): its
// exit status when the exec form's ARGV cannot run, having said why. PROGRAM gets where the
// command is, so that the child need not search again.
std::optional<int> refuse_unrunnable(const RunOptions& options,
                                     const std::vector<std::string>& argv, std::string* program);

// When the lease that the command starts on begins: at acquisition, unless the reply came back
// so late (a paused or overloaded Redis) that less than half of it is left. The lease counts
// from when the command was sent, so such a command would be killed as soon as it started:
// renew first, counting from now. Nothing (the lock is to be given back) if that fails.
std::optional<TimePoint> fresh_lease(Lock& lock, Millis ttl, TimePoint acquire_sent);

// How the run (or, under --retry, the attempt) that ended as END is recorded: RUN says whose it
// was (holder, fence, times, cost); the end and exit status come from END.
RunRecord run_record(RunRecord run, const AttemptEnd& end);

// --retry: whether an attempt that exited with STATUS is worth another (--retry-on), and the
// delay before attempt N + 1.
bool worth_retrying(const RunOptions& options, int status);
Millis retry_delay(const RunOptions& options, int n);

// --retry: records the start of ATTEMPT of the run of HOLDER with FENCE under HELD in its
// history, through LOCK (the lock on a connection of the main thread's): the entry's ID (the
// attempt's end replaces it; should the command never start, the release removes it), or ""
// (none kept; a failure is one warning).
std::string record_attempt_start(Lock& lock, HeldLock& held, const RunOptions& options,
                                 const Holder& holder, int64_t fence, int attempt);
// RECORD's cost: what the command used.
void set_cost(RunRecord& record, const Child::Usage& used);
// --retry: RECORD's attempt ran from FROM to NOW, and the run took the lock at SENT (the steady
// clock), when RECORD's since says by the server's: the attempt's own start by the server's
// clock, and its length.
void set_attempt_span(RunRecord& record, TimePoint sent, TimePoint from, TimePoint now);

// Starts listening for rlock stop's requests to LOCK's holder (stop_request.h) into STOPS, on a
// connection CONNECT makes, on a thread of its own: the listener, or null when it cannot
// (ulimit -n, ulimit -u; said), when the run goes on deaf to rlock stop: the operator's tool
// fails, not the job.
StopListener* listen_for_stops(std::optional<StopListener>& stops, StopListener::Connect connect,
                               const Lock& lock);

// --retry: says that ATTEMPT ended as RECORD says, and that the next comes after DELAY.
void log_retrying(const RunOptions& options, int attempt, const RunRecord& record, Millis delay);

// Appends to the key's history; a failure is one warning, never the job's. False when it was
// surely not recorded (send_history()); true without a history.
bool record_history(Redis& redis, const RunOptions& options, const RunRecord& record);

// The nested run of a lock this process tree holds: become the command, which runs under the
// outer rlock's lock and lease.
int exec_straight_through(const std::vector<std::string>& argv);

}  // namespace rlock
