// rlock extend KEY --token T: renew a lock taken with acquire.
#include "lock.h"
#include "lock_value.h"
#include "log.h"
#include "verbs/verbs.h"

namespace rlock {

int extend_verb(const GlobalOptions& global, const std::string& key, const std::string& token,
                Millis ttl) {
  check_token(token);
  auto redis = connect_redis(global);
  // The token says whose it is, not whether it is a plain lock, a slot of a semaphore (--limit)
  // or a place of a shared lock (--shared): try each in turn.
  Result<bool> renewed = false;
  for (LockMode mode : {LockMode{}, k_any_semaphore, k_shared_place}) {
    auto lock = make_lock(*redis, key, token, mode);
    renewed = lock->renew(ttl, Clock::now() + redis->command_timeout());
    if (!renewed) return unavailable(renewed.failure());
    if (*renewed) break;
  }
  if (!*renewed) {
    log_error(key + ": not ours (the lock expired, or another token holds it); nothing changed");
    return k_exit_not_held;
  }
  log_debug(key + ": extended to " + format_duration(ttl));
  return k_exit_ok;
}

}  // namespace rlock
