#include "run/records.h"

#include <algorithm>

#include "lock/held_lock.h"
#include "lock/lock.h"
#include "print/print_text.h"
#include "process/bounded_call.h"
#include "redis/redis.h"
#include "util/log.h"

namespace rlock {

namespace {

// How long the metrics file may take to write (MetricsRecorder).
constexpr Millis k_metrics_budget{2000};

}  // namespace

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
  if (!problem.empty()) log_warning("--metrics-file: " + problem);
}

void MetricsRecorder::add_cost(const RunRecord& r) {
  if (r.cpu_user_ms < 0) return;  // no command ran
  m.cost_known = true;
  m.cpu_user_seconds += double(r.cpu_user_ms) / 1000;
  m.cpu_system_seconds += double(r.cpu_sys_ms) / 1000;
  m.max_rss_bytes = std::max(m.max_rss_bytes, double(r.max_rss_kb) * 1024);
}

void log_acquired(const RunOptions& options, int64_t fence, Millis waited) {
  Event acquired{"acquired",
                 options.key,
                 "acquired (fence " + std::to_string(fence) + ")",
                 {{"fence", fence}, {"waited_ms", waited.count()}}};
  if (waited > Millis(0) && options.wait) {
    acquired.message = "acquired after waiting " + format_duration(waited) + " (fence " +
                       std::to_string(fence) + ")";
    log(Level::info, acquired);
  } else {
    log(Level::debug, acquired);
  }
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

std::string record_attempt_start(Lock& lock, HeldLock& held, const RunOptions& options,
                                 const Holder& holder, int64_t fence, int attempt) {
  if (options.history_length == 0) return "";
  auto id = eval(
      lock.redis(),
      attempt_start(options.key, holder, fence, attempt, options.history_length, options.retention),
      Clock::now() + lock.command_timeout());
  if (!id) warn_history(options.key, id.failure().message);
  std::string start = id && id->is_string() ? id->str : "";
  held.forget_start(history_forget(options.key, entry_token(lock.token(), attempt), start));
  return start;
}

void set_attempt_span(RunRecord& record, TimePoint sent, TimePoint from, TimePoint now) {
  record.attempt_since = record.holder.since + std::chrono::duration_cast<Millis>(from - sent);
  record.attempt_held_ms = std::chrono::duration_cast<Millis>(now - from).count();
}

void log_retrying(const RunOptions& options, int attempt, const RunRecord& record, Millis delay) {
  log(Level::warning, Event{"retrying",
                            options.key,
                            "attempt " + std::to_string(attempt) + " of " +
                                std::to_string(options.retry + 1) + ": " + result_text(record) +
                                "; running the command again in " + format_duration(delay),
                            {{"attempt", attempt}, {"delay_ms", delay.count()}}});
}

bool record_history(Redis& redis, const RunOptions& options, const RunRecord& record) {
  return options.history_length == 0 ||
         send_history(
             redis, options.key,
             history_entry(options.key, record, options.history_length, options.retention));
}

}  // namespace rlock
