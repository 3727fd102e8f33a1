#include "run/command.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "lock/lease.h"
#include "lock/lock.h"
#include "redis/redis_url.h"
#include "util/log.h"
#include "util/stderr_writer.h"
#include "util/text.h"

namespace rlock {

Child::Spec command_spec(const RunOptions& options, const std::vector<std::string>& argv,
                         const std::string& program, const std::string& token, int64_t fence) {
  Child::Spec spec{.argv = argv,
                   .env = {"RLOCK_KEY=" + options.key, "RLOCK_TOKEN=" + token,
                           "RLOCK_FENCE=" + std::to_string(fence),
                           "RLOCK_TTL_MS=" + std::to_string(options.ttl.count())},
                   .path = program};
  if (options.retry > 0) spec.env.push_back("RLOCK_ATTEMPT=1");
  // No Redis secret of rlock's goes to the job (rlock-run(1) "Options of run").
  keep_secrets(spec.env, spec.unset, true);
  return spec;
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

StopListener* listen_for_stops(std::optional<StopListener>& stops, StopListener::Connect connect,
                               const Lock& lock, Millis after) {
  try {
    stops.emplace(std::move(connect), lock.key(), lock.token(), after);
    stops->start();
    return &*stops;
  } catch (const std::exception& e) {
    log(Level::warning, {"stop_listener", lock.key(),
                         std::string("rlock stop will not reach this run (") + e.what() + ")"});
  }
  stops.reset();
  return nullptr;
}

int exec_straight_through(std::vector<std::string> argv) {
  std::vector<char*> args = c_strings(argv);
  flush_stderr(k_exit_stderr_patience);  // what is queued would be lost with this process
  ::execvp(args[0], args.data());
  int err = errno;
  log_error(argv[0] + ": " + std::strerror(err));
  return err == ENOENT ? k_exit_not_found : k_exit_not_executable;
}

}  // namespace rlock
