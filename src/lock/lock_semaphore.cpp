// A semaphore (--limit N): up to N holders at once, each a slot with its own token and expiry
// in {KEY}:rlock:sem, their values in {KEY}:rlock:holders. KEY itself is never written.
#include "lock/lock_kinds.h"
#include "lock/scripts.h"

namespace rlock {

namespace {

class SemaphoreLock final : public PlaceLock {
public:
  SemaphoreLock(Redis& redis, std::string key, std::string token, LockMode mode)
      : PlaceLock(redis, std::move(key), std::move(token), mode, "sem", "holders") {}

  Result<AcquireOutcome> try_acquire(const std::string& value, Millis ttl,
                                     const std::optional<WaitPlan>& wait,
                                     TimePoint deadline) override {
    Argv keys{places_key_, values_key_, fence_key_, queue_key_, alive_key_, pause_key_};
    Argv args{value,
              std::to_string(ttl.count()),
              token_,
              wake_prefix_,
              mode_.fair ? "1" : "0",
              std::to_string(wait ? wait->max_block.count() : 0),
              std::to_string(wait ? wait->fallback.count() : 0),
              std::to_string(mode_.limit),
              std::to_string(mode_.retention.count())};
    add_start(keys, args);
    auto reply = eval(redis_, scripts::semaphore_acquire, keys, args, deadline);
    return acquire_outcome(std::move(reply), places_key_, ttl, deadline);
  }

  Result<bool> release(TimePoint deadline, const std::vector<ScriptCall>& then,
                       std::vector<Reply>* then_replies) override {
    auto replies = eval_then(redis_, scripts::semaphore_release,
                             {places_key_, values_key_, queue_key_, alive_key_, ends_key_,
                              phase_key_},
                             {token_, wake_prefix_}, then, deadline);
    return release_outcome(std::move(replies), then_replies);
  }
};

}  // namespace

Result<bool> PlaceLock::renew(Millis ttl, TimePoint deadline, const PhaseUpdate& phase) {
  Argv keys{places_key_, values_key_, fence_key_};
  Argv args{token_, std::to_string(ttl.count()), std::to_string(mode_.retention.count())};
  add_phase(keys, args, phase);
  return renew_outcome(eval(redis_, scripts::semaphore_renew, keys, args, deadline), places_key_,
                       ttl, deadline);
}

Result<bool> PlaceLock::holds(TimePoint deadline) {
  return integer_result(eval(redis_, scripts::semaphore_holds, {places_key_}, {token_}, deadline),
                        "the holds script");
}

std::unique_ptr<Lock> make_semaphore_lock(Redis& redis, std::string key, std::string token,
                                          LockMode mode) {
  return std::make_unique<SemaphoreLock>(redis, std::move(key), std::move(token), mode);
}

}  // namespace rlock
