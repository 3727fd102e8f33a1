// rlock release KEY --token T | --force: give a lock back, or break anyone's and say whose.
#include "lock.h"
#include "lock_value.h"
#include "log.h"
#include "output.h"
#include "verbs/verbs.h"

namespace rlock {

int release_verb(const GlobalOptions& global, const std::string& key,
                 const std::optional<std::string>& token, bool force) {
  if (force == token.has_value()) throw usage_error("give either --token T or --force");
  auto redis = connect_redis(global);
  if (token) {
    check_token(*token);
    // A plain lock or a semaphore slot (--limit): try the one, then the other.
    Result<bool> released = false;
    for (LockMode mode : {LockMode{}, k_any_semaphore}) {
      auto lock = make_lock(*redis, key, *token, mode);
      released = lock->release(Clock::now() + redis->command_timeout());
      if (!released) return unavailable(released.failure());
      if (*released) break;
    }
    if (!*released) {
      log_error(key + ": not ours (the lock expired, or another token holds it); nothing changed");
      return k_exit_not_held;
    }
    log_debug(key + ": released");
    return k_exit_ok;
  }
  auto broken = break_lock(*redis, key);
  if (!broken) return unavailable(broken.failure());
  if (broken->type == "none") {
    write_stdout(key + ": was free; nothing to release\n");
    return k_exit_not_held;
  }
  if (broken->type != "string") {
    log_error(key + ": not a lock: the key holds a " + broken->type + "; left alone");
    return k_exit_unavailable;
  }
  write_stdout(key + ": released by force; it was held by " +
               describe_holder(broken->value, broken->pttl) + "\n");
  return k_exit_ok;
}

}  // namespace rlock
