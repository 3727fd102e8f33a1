// --metrics-file: Prometheus' text format for node_exporter's textfile collector. Each run adds
// its numbers to those already in the file (so cron runs accumulate), under a lock on a sidecar
// file, and replaces the file atomically (write a temporary, rename).
//
// Counters and histograms add up across runs; the last-success gauge is the last success's.
// The file is one host's: across a fleet, aggregate by key (max of the gauge, sum of the rest).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace rlock {

// What came of trying the lock: taken, kept out by a holder (or a pause), kept out because this
// period's run is done (--once-per), or an error. Named in the file as its `result` label.
enum class Acquisition { acquired, busy, done, error };

struct RunMetrics {
  std::string key;
  Acquisition result = Acquisition::error;
  double wait_seconds = 0;
  double hold_seconds = 0;
  int64_t renewals = 0;
  int64_t renewal_failures = 0;
  int64_t losses = 0;
  // How the command's run ended: success, failure (a non-zero exit), signalled, lost,
  // max-run, hung; empty when it did not run.
  std::string end;
  double finished_at = 0;  // Unix seconds, wall clock: when the run ended
  // What the command cost (all its attempts); cost_known false: it did not run.
  bool cost_known = false;
  double cpu_user_seconds = 0;
  double cpu_system_seconds = 0;
  double max_rss_bytes = 0;
};

// The buckets' upper bounds (seconds) of the wait and run time histograms; +Inf follows.
inline constexpr double k_wait_buckets[] = {0.005, 0.05, 0.5, 1, 5, 15, 60, 300, 900, 3600};
inline constexpr double k_run_buckets[] = {1, 5, 15, 60, 300, 900, 1800, 3600, 7200, 21600, 86400};

// Series name with labels ("rlock_losses_total{key=\"k\"}") -> value.
using MetricSeries = std::map<std::string, double>;

// Pure: the file's series, and the text for a set of series.
MetricSeries parse_metrics(const std::string& text);
std::string format_metrics(const MetricSeries& series);
// M added to SERIES.
void add_run(MetricSeries& series, const RunMetrics& m);

// Adds M to the file at PATH. Returns an error message, empty on success: a metrics file that
// cannot be written must never fail the job.
std::string record_metrics(const std::string& path, const RunMetrics& m);

}  // namespace rlock
