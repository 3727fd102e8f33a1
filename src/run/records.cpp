#include "run/records.h"

#include <algorithm>

#include "lock/held_lock.h"
#include "lock/lock.h"
#include "print/print_text.h"
#include "process/bounded_call.h"
#include "redis/redis.h"
#include "util/log.h"

namespace rlock {

// How long the metrics file may take to write (MetricsRecorder).
constexpr Millis k_metrics_budget{2000};

MetricsRecorder::MetricsRecorder(const RunOptions& options) : path(options.metrics_file) {
  m.key = options.key;
}

MetricsRecorder::~MetricsRecorder() {
  if (!path) return;
  if (acquired) m.hold_seconds = std::chrono::duration<double>(Clock::now() - *acquired).count();
  m.finished_at =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  auto call = call_bounded([this] { return record_metrics(*path, m); }, k_metrics_budget);
  std::string problem = call.text;
  if (call.outcome == BoundedCall::Outcome::timed_out)
    problem = *path + " not written within " + format_duration(k_metrics_budget) +
              " (a file system that does not answer?)";
  // Said even under -q, as cron lines run: a run whose metrics are never written is a job
  // nobody monitors, and nothing else would say so.
  if (!problem.empty())
    log(Level::alert, {"metrics_not_written", m.key, "--metrics-file: " + problem});
}

void MetricsRecorder::add_cost(const RunRecord& r) {
  if (r.cpu_user_ms < 0) return;  // no command ran
  m.cost_known = true;
  m.cpu_user_seconds += double(r.cpu_user_ms) / 1000;
  m.cpu_system_seconds += double(r.cpu_sys_ms) / 1000;
  m.max_rss_bytes = std::max(m.max_rss_bytes, double(r.max_rss_kb) * 1024);
}

void log_acquired(const RunOptions& options, int64_t fence, Millis waited) {
  bool waited_for_it = waited > Millis(0) && options.wait;
  std::string after = waited_for_it ? " after waiting " + format_duration(waited) : "";
  std::string message = "acquired" + after + " (fence " + std::to_string(fence) + ")";
  log(waited_for_it ? Level::info : Level::debug,
      {"acquired", options.key, message, {{"fence", fence}, {"waited_ms", waited.count()}}});
}

bool record_breaker(Lock& lock, RunRecord& record) {
  auto breaking =
      broken_by(lock.redis(), lock.key(), lock.token(), Clock::now() + lock.command_timeout());
  if (!breaking || !*breaking) return false;
  record.end = run_end_name(RunEnd::broken);
  record.by = (*breaking)->by;
  record.reason = (*breaking)->reason;
  return true;
}

void set_attempt_span(RunRecord& record, TimePoint sent, TimePoint from, TimePoint now) {
  record.attempt_since = record.holder.since + std::chrono::duration_cast<Millis>(from - sent);
  record.attempt_held_ms = std::chrono::duration_cast<Millis>(now - from).count();
}

bool record_history(Redis& redis, const RunOptions& options, const RunRecord& record) {
  return options.history_length == 0 ||
         send_history(
             redis, options.key,
             history_entry(options.key, record, options.history_length, options.retention));
}

}  // namespace rlock
