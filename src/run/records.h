// What a run leaves on record (rlock run): history entries (each attempt's start and end under
// --retry, a breaker's name), its lines on stderr, and the metrics file.
#pragma once

#include <optional>
#include <string>

#include "lock/history.h"
#include "print/metrics.h"
#include "settings/settings.h"
#include "util/clock.h"

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
};

// Says that the lock was taken, with FENCE, after waiting WAITED: on stderr when it waited,
// else with -v.
void log_acquired(const RunOptions& options, int64_t fence, Millis waited);

// A lock lost to release --force: RECORD is made the record of a broken run, by whom and why,
// as the tombstone in its place says (one read, on this rare way out only). False when no
// tombstone says so (the key was deleted, or taken by another token).
bool record_breaker(Lock& lock, RunRecord& record);

// --retry: records the start of ATTEMPT of the run of HOLDER with FENCE under HELD in its
// history, through LOCK (the lock on a connection of the main thread's): the entry's ID (the
// attempt's end replaces it; should the command never start, the release removes it), or ""
// (none kept; a failure is one warning).
std::string record_attempt_start(Lock& lock, HeldLock& held, const RunOptions& options,
                                 const Holder& holder, int64_t fence, int attempt);
// --retry: RECORD's attempt ran from FROM to NOW, and the run took the lock at SENT (the steady
// clock), when RECORD's since says by the server's: the attempt's own start by the server's
// clock, and its length.
void set_attempt_span(RunRecord& record, TimePoint sent, TimePoint from, TimePoint now);

// --retry: says that ATTEMPT ended as RECORD says, and that the next comes after DELAY.
void log_retrying(const RunOptions& options, int attempt, const RunRecord& record, Millis delay);

// Appends to the key's history; a failure is one warning, never the job's. False when it was
// surely not recorded (send_history()); true without a history.
bool record_history(Redis& redis, const RunOptions& options, const RunRecord& record);

}  // namespace rlock
