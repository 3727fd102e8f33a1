#include "verbs/verbs.h"

#include <cstdlib>

#include "lock/lock_value.h"
#include "lock/pause.h"
#include "print/print.h"
#include "process/signals.h"
#include "util/log.h"

namespace rlock {

int failure_exit_status(const Failure& failure) {
  return failure.why == Failure::Why::out_of_resources ? k_exit_internal : k_exit_unavailable;
}

int unavailable(const Failure& failure) {
  log_error(failure.message);
  return failure_exit_status(failure);
}

std::optional<int> exit_unless_obtained(const WaitOutcome& outcome, const RunOptions& options) {
  if (auto* busy = std::get_if<NotObtained>(&outcome)) {
    if (busy->paused)
      log(Level::info, {"paused",
                        options.key,
                        pause_text(busy->holder_value, busy->pttl),
                        {{"ttl_ms", busy->pttl.count()}}});
    else if (busy->holder_value.empty() && options.shared)
      log(Level::info, {"busy", options.key,
                        "busy: a request for the lock alone came first, and shared requests "
                        "queue behind it"});
    else if (busy->holder_value.empty())
      log(Level::info, {"busy", options.key, "busy: earlier waiters come first (--fair)"});
    else
      log(Level::info,
          {"busy",
           options.key,
           "busy, held by " + describe_holders(busy->holder_value, busy->pttl, busy->sharers),
           {{"ttl_ms", busy->pttl.count()}}});
    return options.conflict_exit_code;
  }
  if (auto* interrupted = std::get_if<Interrupted>(&outcome)) {
    log(Level::info, {"gave_up",
                      options.key,
                      "gave up waiting on SIG" + signal_name(interrupted->signo),
                      {{"signal", interrupted->signo}}});
    return exit_status_for_signal(interrupted->signo);
  }
  if (auto* not_lock = std::get_if<NotALock>(&outcome)) {
    log(Level::error, {"not_a_lock", options.key, "not a lock: the key holds a " + not_lock->type});
    return k_exit_unavailable;
  }
  if (auto* failure = std::get_if<Failure>(&outcome)) {
    log(Level::error,
        {failure->why == Failure::Why::out_of_resources ? "out_of_resources" : "redis_error",
         options.key, failure->message});
    return failure_exit_status(*failure);
  }
  return std::nullopt;
}

std::optional<std::string> inherited_token(Redis& redis, const RunOptions& options) {
  const char* key = std::getenv("RLOCK_KEY");
  const char* token = std::getenv("RLOCK_TOKEN");
  if (!key || !token || options.key != key || !is_token(token)) return std::nullopt;
  auto outer = make_lock(redis, options.key, token, lock_mode(options));
  auto held = outer->holds(Clock::now() + redis.command_timeout());
  if (!held || !*held) {
    log(Level::debug, {"token_not_held", options.key,
                       "RLOCK_TOKEN in the environment does not hold it; taking it anew"});
    return std::nullopt;
  }
  log(Level::debug, {"reentrant", options.key,
                     "already held by this process tree (RLOCK_TOKEN): going straight "
                     "through, without renewing or releasing it"});
  return std::string(token);
}

LockMode lock_mode(const RunOptions& options) {
  return LockMode{options.limit, options.fair, options.min_replicas, options.retention,
                  options.shared};
}

void check_topology(const Redis& redis, const RunOptions& options) {
  if (redis.node_count() < 2) return;
  const char* what = options.limit > 0      ? "--limit"
                     : options.shared       ? "--shared"
                     : options.fair         ? "--fair"
                     : options.min_replicas ? "--min-replicas"
                     : options.once_per     ? "--once-per"
                                            : nullptr;
  if (what)
    throw usage_error(std::string(what) + " is not available with several Redis URLs (Redlock): " +
                      "its nodes are independent, with no queue, slots, period records or "
                      "replicas in common");
}

Millis positive_duration(const char* flag, const std::string& text) {
  if (duration_too_long(text))
    throw usage_error(std::string(flag) + ": '" + text + "' is too long: at most " +
                      format_duration(k_max_duration));
  auto d = parse_duration(text);
  if (!d || d->count() <= 0)
    throw usage_error(std::string(flag) + ": '" + text + "' is not a duration above 0 (30s, 2h)");
  return *d;
}

void check_token(const std::string& token) {
  if (!is_token(token))
    throw usage_error("--token: '" + token + "' is not an rlock token (32 hex digits)");
}

void warn_wrong_types(const std::vector<LockState>& locks) {
  for (const LockState& s : locks)
    for (const std::string& message : s.wrong_types) log_warning(message);
}

void warn_unanswered(const std::vector<LockState>& locks) {
  // Each lock of one read names the same nodes.
  if (!locks.empty())
    for (const std::string& failure : locks.front().votes.failures)
      log_warning("no answer from a Redlock node: " + failure);
}

}  // namespace rlock
