// rlock acquire KEY: take the lock for a script that cannot wrap a command; print the token.
#include "lock.h"
#include "lock_value.h"
#include "log.h"
#include "output.h"
#include "signals.h"
#include "verbs/verbs.h"
#include "wait.h"

namespace rlock {

int acquire_verb(const GlobalOptions& global, const RunOptions& options, bool json) {
  SignalEvents signals;  // a signal while waiting ends the wait, leaving nothing behind
  auto redis = connect_redis(global);
  Lock lock(*redis, options.key, make_token());
  LockValue value{lock.token(), parent_holder(), std::nullopt};
  WaitOutcome outcome = acquire(lock, encode_lock_value(value), options.ttl, options.wait, signals);
  if (auto* busy = std::get_if<NotObtained>(&outcome)) {
    log_info(options.key + ": busy, held by " + describe_holder(busy->holder_value, busy->pttl));
    return options.conflict_exit_code;
  }
  if (auto* interrupted = std::get_if<Interrupted>(&outcome))
    return exit_status_for_signal(interrupted->signo);
  if (auto* not_lock = std::get_if<NotALock>(&outcome)) {
    log_error(options.key + ": not a lock: the key holds a " + not_lock->type);
    return k_exit_unavailable;
  }
  if (auto* failure = std::get_if<Failure>(&outcome)) return unavailable(*failure);
  const auto& got = std::get<Obtained>(outcome);
  try {
    print_acquired(options.key, lock.token(), got.fence, options.ttl, output_style(json));
  } catch (const Error&) {
    // Nobody can learn the token, so nobody could release the lock: give it back now.
    (void)lock.release(Clock::now() + lock.command_timeout());
    throw;
  }
  return k_exit_ok;
}

}  // namespace rlock
