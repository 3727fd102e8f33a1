// The parts of rlock run that are not its story (run.cpp tells that): the command line it
// runs, the refusal of a command that cannot run, a lease fresh enough to start on, the nested
// run, the history entry of a run that did not happen, and the metrics file.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lock/history.h"
#include "output/metrics.h"
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
};

// The command to start: COMMAND, or $SHELL -c TEXT.
std::vector<std::string> command_argv(const RunOptions& options);

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

// Appends to the key's history; a failure is one warning, never the job's.
void record_history(Redis& redis, const RunOptions& options, const RunRecord& record);

// The nested run of a lock this process tree holds: become the command, which runs under the
// outer rlock's lock and lease.
int exec_straight_through(const std::vector<std::string>& argv);

}  // namespace rlock
