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
  check_topology(*redis, options);
  if (auto token = inherited_token(*redis, options)) {
    // Inside a command that holds KEY: that lock is ours already. Print its token.
    print_acquired(options.key, *token, 0, options.ttl, output_style(json));
    return k_exit_ok;
  }
  auto owned_lock = make_lock(*redis, options.key, make_token(), lock_mode(options));
  Lock& lock = *owned_lock;
  LockValue value{lock.token(), parent_holder(), std::nullopt, std::nullopt};
  WaitOutcome outcome = acquire(lock, encode_lock_value(value), options.ttl, options.wait, signals);
  if (auto status = exit_unless_obtained(outcome, options)) return *status;
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
