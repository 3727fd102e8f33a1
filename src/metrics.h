// --metrics-file: counters in Prometheus' text format for node_exporter's textfile collector.
// Each run adds its numbers to those already in the file (so cron runs accumulate), under a
// lock on a sidecar file, and replaces the file atomically (write a temporary, rename).
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace rlock {

struct RunMetrics {
  std::string key;
  std::string result;  // acquired, busy, error
  double wait_seconds = 0;
  double hold_seconds = 0;
  int64_t renewals = 0;
  int64_t renewal_failures = 0;
  int64_t losses = 0;
};

// Series name with labels ("rlock_losses_total{key=\"k\"}") -> value.
using MetricSeries = std::map<std::string, double>;

// Pure: the file's series, and the text for a set of series.
MetricSeries parse_metrics(const std::string& text);
std::string format_metrics(const MetricSeries& series);
// M's counters added to SERIES.
void add_run(MetricSeries& series, const RunMetrics& m);

// Adds M to the file at PATH. Returns an error message, empty on success: a metrics file that
// cannot be written must never fail the job.
std::string record_metrics(const std::string& path, const RunMetrics& m);

}  // namespace rlock
