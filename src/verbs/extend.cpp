// rlock extend KEY --token T: renew a lock taken with acquire.
#include "lock/lock.h"
#include "lock/lock_state.h"
#include "lock/lock_value.h"
#include "util/log.h"
#include "verbs/command.h"
#include "verbs/verbs.h"

namespace rlock {

namespace {

// The ttl the lock TOKEN holds of KEY was taken with (its value says, and a semaphore's slot's
// or a shared place's), or nullopt when it is not found (not ours: the renewal then changes
// nothing); a failure when the read fails, rather than a guess that would cut the lock short.
Result<std::optional<Millis>> own_ttl(Redis& redis, const std::string& key,
                                      const std::string& token) {
  auto states = read_locks(redis, {key}, Unknown::shown);
  if (!states) return states.failure();
  if (states->empty()) return std::optional<Millis>();
  const LockState& state = states->front();
  auto ours = [&](const std::optional<LockValue>& v) -> std::optional<Millis> {
    if (v && v->token == token && v->ttl_ms && *v->ttl_ms > 0) return Millis(*v->ttl_ms);
    return std::nullopt;
  };
  if (auto ttl = ours(state.value)) return ttl;
  for (const auto* holders : {&state.semaphore, &state.shared})
    for (const SemaphoreHolder& holder : *holders)
      if (auto ttl = ours(holder.value)) return ttl;
  return std::optional<Millis>();
}

}  // namespace

// TTL: --ttl's; nullopt: the lock's own (the one acquire took it with), else FALLBACK.
int extend_verb(const GlobalOptions& global, const std::string& key, const std::string& token,
                std::optional<Millis> given, Millis fallback) {
  check_token(token);
  auto redis = connect_redis(global);
  Millis ttl = fallback;
  if (given) {
    ttl = *given;
  } else {
    auto own = own_ttl(*redis, key, token);
    if (!own) return unavailable(own.failure());
    ttl = own->value_or(fallback);
  }
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
    // Only --ttl changes the lock's ttl: a config file's is a default for new locks.
    auto ttl = in.settings.find("ttl");
    bool given = ttl != in.settings.end() && ttl->second.origin.kind == Origin::Kind::flag;
    return extend_verb(in.resolved.global, in.key(key), *token,
                       given ? std::optional<Millis>(in.resolved.run.ttl) : std::nullopt,
                       in.resolved.run.ttl);
  }
};

constexpr Option k_options[] = {
    option<&ExtendArgs::key>("KEY", k_key_help).must(),
    option<&ExtendArgs::token>("--token", "the token acquire printed", "TOKEN").must(),
    setting("ttl", "the new expiry, from now (default: the ttl the lock was taken with)")};

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
