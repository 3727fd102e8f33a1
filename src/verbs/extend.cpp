// rlock extend KEY --token T: renew a lock taken with acquire.
#include "lock/lock.h"
#include "lock/lock_value.h"
#include "util/log.h"
#include "verbs/command.h"
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
    // A run's phase, if it has one, keeps step with the lock's new ttl.
    PhaseUpdate keep;
    keep.op = PhaseUpdate::Op::keep;
    renewed = lock->renew(ttl, Clock::now() + redis->command_timeout(), keep);
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

namespace {

struct ExtendArgs : Arguments {
  std::string key;
  std::optional<std::string> token;

  int run(const Invocation& in) override {
    return extend_verb(in.resolved.global, in.key(key), *token, in.resolved.run.ttl);
  }
};

constexpr Option k_options[] = {
    option<&ExtendArgs::key>("KEY", k_key_help).must(),
    option<&ExtendArgs::token>("--token", "the token acquire printed", "T").must(),
    setting("ttl", "the new expiry, from now (default 30s)")};

}  // namespace

constexpr Command k_extend_command = {
    "extend",
    "renew a lock taken with acquire",
    "KEY --token T",
    {k_options, k_output, k_connection},
    "Examples:\n"
    "  rlock extend lock:migrate --token \"$t\"\n"
    "Exit status: 0 extended, 1 not ours (nothing changed), 69 Redis unreachable; 64 usage, "
    "78 configuration, 125 rlock failed.",
    make_arguments<ExtendArgs>};

}  // namespace rlock
