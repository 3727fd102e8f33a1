// What a run leaves on record (rlock run): history entries, its lines on stderr, the metrics file.
#pragma once

#include <optional>
#include <string>

#include "lock/history.h"
#include "print/metrics.h"
#include "settings/settings.h"
#include "util/clock.h"

namespace rlock {

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

// Says that the lock was taken, with FENCE, after WAITED: on stderr when it waited, else with -v.
void log_acquired(const RunOptions& options, int64_t fence, Millis waited);

// A lock lost to release --force: RECORD is made the record of a broken run, by whom and why,
// as the tombstone in its place says (one read, on this rare way out only). False when no
// tombstone says so (the key was deleted, or taken by another token).
bool record_breaker(Lock& lock, RunRecord& record);

// --retry: RECORD's attempt ran from FROM to NOW; the run took the lock at SENT (steady clock),
// RECORD's since (the server's): sets the attempt's start by the server's clock, and its length.
void set_attempt_span(RunRecord& record, TimePoint sent, TimePoint from, TimePoint now);

// Appends to the key's history; a failure is one warning, never the job's. False when it was
// surely not recorded (send_history()); true without a history.
bool record_history(Redis& redis, const RunOptions& options, const RunRecord& record);

}  // namespace rlock
