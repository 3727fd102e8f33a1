#include "verbs/run_parts.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "lock/held_lock.h"
#include "lock/lease.h"
#include "lock/lock.h"
#include "process/bounded_call.h"
#include "process/child.h"
#include "redis/redis.h"
#include "util/log.h"
#include "util/stderr_writer.h"
#include "util/text.h"

namespace rlock {

namespace {

// How long the metrics file may take to write (MetricsRecorder).
constexpr Millis k_metrics_budget{2000};

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
  auto renewed = lock.renew(ttl, std::min(sent + lock.command_timeout(), sent + ttl / 2));
  if (renewed && *renewed) {
    log(Level::debug, {"renewed", lock.key(), "renewed at once: Redis answered late"});
    return sent;
  }
  log_error(lock.key() + ": Redis answered too late to run the command on the lease (" +
            (renewed ? std::string("the lock expired meanwhile") : renewed.failure().message) +
            ")");
  return std::nullopt;
}

void record_history(Redis& redis, const RunOptions& options, const RunRecord& record) {
  if (options.history_length > 0)
    send_history(redis, options.key,
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
