#include "verbs/run_parts.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include "lock/held_lock.h"
#include "lock/lease.h"
#include "lock/lock.h"
#include "lock/pause.h"
#include "lock/stop_request.h"
#include "output/output_text.h"
#include "process/bounded_call.h"
#include "process/child.h"
#include "redis/redis.h"
#include "redis/redis_url.h"
#include "util/log.h"
#include "util/stderr_writer.h"
#include "util/text.h"

namespace rlock {

namespace {

// How long the metrics file may take to write (MetricsRecorder).
constexpr Millis k_metrics_budget{2000};
// When a run begins to listen for rlock stop (stop_request.h): a request is acted on within a
// second, and a command that ends sooner (the herd's short jobs) costs Redis no connection.
constexpr Millis k_stop_listen_after{500};

}  // namespace

MetricsRecorder::MetricsRecorder(const RunOptions& options) : path(options.metrics_file) {
  m.key = options.key;
  m.result = "error";
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

void MetricsRecorder::run_ended(RunEnd end, const RunRecord& r, bool cost) {
  if (cost) add_cost(r);
  m.end = run_end_label(end, r.exit_status);
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

void record_skip(Redis& redis, const RunOptions& options, const Holder& holder,
                 const std::string& token, const NotObtained& busy, int status) {
  RunRecord r = skipped_run(holder, token, busy.paused ? RunEnd::paused : RunEnd::busy, status);
  if (auto pause = busy.paused ? decode_pause(busy.holder_value) : std::nullopt) {
    r.by = pause->by;
    r.reason = pause->reason;
  }
  record_history(redis, options, r);
}

Child::Spec command_spec(const RunOptions& options, const std::vector<std::string>& argv,
                         const std::string& program, const std::string& token, int64_t fence) {
  Child::Spec spec{argv,
                   {"RLOCK_KEY=" + options.key, "RLOCK_TOKEN=" + token,
                    "RLOCK_FENCE=" + std::to_string(fence),
                    "RLOCK_TTL_MS=" + std::to_string(options.ttl.count())},
                   {},
                   program,
                   std::nullopt};
  if (options.retry > 0) spec.env.push_back("RLOCK_ATTEMPT=1");
  // No Redis secret of rlock's goes to the job (README "Choosing options").
  keep_secrets(spec.env, spec.unset, true);
  return spec;
}

void set_attempt(Child::Spec& spec, int n) {
  for (std::string& var : spec.env)
    if (var.starts_with("RLOCK_ATTEMPT=")) var = "RLOCK_ATTEMPT=" + std::to_string(n);
}

void keep_secrets(std::vector<std::string>& env, std::vector<std::string>& unset,
                  bool keep_rediscli_auth) {
  unset.push_back("RLOCK_PASSWORD");
  if (!keep_rediscli_auth) unset.push_back("REDISCLI_AUTH");
  if (const char* url = std::getenv("RLOCK_REDIS_URL"))
    env.push_back("RLOCK_REDIS_URL=" + without_password(url));
}

std::vector<std::string> command_argv(const RunOptions& options) {
  if (!options.shell_command) return options.command;
  const char* shell = std::getenv("SHELL");
  return {shell && *shell ? shell : "/bin/sh", "-c", *options.shell_command};
}

std::string command_name(const RunOptions& options) {
  if (!options.shell_command) return options.command.front();
  return shell_command_name(*options.shell_command);
}

std::optional<int> refuse_unrunnable(const RunOptions& options,
                                     const std::vector<std::string>& argv, std::string* program) {
  if (options.shell_command) return std::nullopt;  // the shell reports its own errors
  if (is_assignment_word(argv.front())) {
    // Not a program but a shell's assignment, whose value may be a secret: not printed.
    std::string name = argv.front().substr(0, argv.front().find('='));
    log_error(name + "=...: an assignment is not a command (run `env " + name +
              "=... COMMAND`, or give the line to a shell with -c)");
    return k_exit_not_found;
  }
  if (auto problem = check_command(argv.front(), program)) {
    log_error(problem->message);
    return problem->exit_status;
  }
  return std::nullopt;
}

std::optional<TimePoint> fresh_lease(Lock& lock, Millis ttl, TimePoint acquire_sent) {
  if (Clock::now() < lease_deadline(acquire_sent, ttl) - ttl / 2) return acquire_sent;
  TimePoint sent = Clock::now();
  auto renewed =
      lock.renew(ttl, std::min(sent + lock.command_timeout(), sent + ttl / 2), PhaseUpdate{});
  if (renewed && *renewed) {
    log(Level::debug, {"renewed", lock.key(), "renewed at once: Redis answered late"});
    return sent;
  }
  log_error(lock.key() + ": Redis answered too late to run the command on the lease (" +
            (renewed ? std::string("the lock expired meanwhile") : renewed.failure().message) +
            ")");
  return std::nullopt;
}

RunRecord run_record(RunRecord run, const AttemptEnd& end) {
  run.end = run_end_name(end.end);
  run.exit_status = run_end_exit_status(end.end, end.status, end.status);
  if (end.stop) {
    run.by = end.stop->by;
    run.reason = end.stop->reason;
  }
  return run;
}

bool worth_retrying(const RunOptions& options, int status) {
  if (status == 0) return false;
  const auto& codes = options.retry_on;
  return codes.empty() || std::binary_search(codes.begin(), codes.end(), status);
}

Millis retry_delay(const RunOptions& options, int n) {
  Millis delay = options.retry_delay;
  for (int i = 1; i < n && delay < k_max_retry_delay; ++i) delay *= 2;
  return std::min(delay, k_max_retry_delay);
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

void set_cost(RunRecord& record, const Child::Usage& used) {
  record.cpu_user_ms = used.user.count();
  record.cpu_sys_ms = used.sys.count();
  record.max_rss_kb = used.max_rss_kb;
}

void set_attempt_span(RunRecord& record, TimePoint sent, TimePoint from, TimePoint now) {
  record.attempt_since = record.holder.since + std::chrono::duration_cast<Millis>(from - sent);
  record.attempt_held_ms = std::chrono::duration_cast<Millis>(now - from).count();
}

StopListener* listen_for_stops(std::optional<StopListener>& stops, StopListener::Connect connect,
                               const Lock& lock) {
  try {
    stops.emplace(std::move(connect), lock.key(), lock.token(), k_stop_listen_after);
    stops->start();
    return &*stops;
  } catch (const Error& e) {
    log(Level::warning, {"stop_listener", lock.key(),
                         std::string(e.what()) + "; rlock stop will not reach this run"});
  } catch (const std::system_error& e) {
    log(Level::warning, {"stop_listener", lock.key(),
                         std::string("cannot listen for stop requests (") + e.what() +
                             "); rlock stop will not reach this run"});
  }
  stops.reset();
  return nullptr;
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

int exec_straight_through(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  flush_stderr(k_exit_stderr_patience);  // what is queued would be lost with this process
  ::execvp(args[0], args.data());
  int err = errno;
  log_error(argv[0] + ": " + std::strerror(err));
  return err == ENOENT ? k_exit_not_found : k_exit_not_executable;
}

}  // namespace rlock
