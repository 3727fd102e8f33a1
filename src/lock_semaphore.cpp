// A semaphore (--limit N): up to N holders at once, each a slot with its own token and expiry
// in {KEY}:rlock:sem, their values in {KEY}:rlock:holders. KEY itself is never written.
#include "lock_kinds.h"
#include "scripts.h"

namespace rlock {

namespace {

class SemaphoreLock final : public Lock {
public:
  SemaphoreLock(Redis& redis, std::string key, std::string token, LockMode mode)
      : Lock(redis, std::move(key), std::move(token), mode), sem_key_(helper_key(key_, "sem")),
        holders_key_(helper_key(key_, "holders")) {}

  Result<AcquireOutcome> try_acquire(const std::string& value, Millis ttl,
                                     const std::optional<WaitPlan>& wait,
                                     TimePoint deadline) override {
    auto reply = eval(redis_, scripts::semaphore_acquire,
                      {sem_key_, holders_key_, fence_key_, queue_key_, alive_key_},
                      {value, std::to_string(ttl.count()), token_, wake_prefix_,
                       mode_.fair ? "1" : "0", std::to_string(wait ? wait->max_block.count() : 0),
                       std::to_string(wait ? wait->fallback.count() : 0),
                       std::to_string(mode_.limit), std::to_string(mode_.retention.count())},
                      deadline);
    return acquire_outcome(std::move(reply), sem_key_, ttl, deadline);
  }

  Result<bool> renew(Millis ttl, TimePoint deadline) override {
    return renew_outcome(
        eval(redis_, scripts::semaphore_renew, {sem_key_, holders_key_, fence_key_},
             {token_, std::to_string(ttl.count()), std::to_string(mode_.retention.count())},
             deadline),
        sem_key_, ttl, deadline);
  }

  Result<bool> release(TimePoint deadline, const std::vector<Argv>& then,
                       std::vector<Reply>* then_replies) override {
    auto replies = eval_then(redis_, scripts::semaphore_release,
                             {sem_key_, holders_key_, queue_key_, alive_key_},
                             {token_, wake_prefix_}, then, deadline);
    return release_outcome(std::move(replies), then_replies);
  }

  Result<bool> holds(TimePoint deadline) override {
    return integer_result(eval(redis_, scripts::semaphore_holds, {sem_key_}, {token_}, deadline),
                          "the holds script");
  }

private:
  const std::string sem_key_, holders_key_;
};

}  // namespace

std::unique_ptr<Lock> make_semaphore_lock(Redis& redis, std::string key, std::string token,
                                          LockMode mode) {
  return std::make_unique<SemaphoreLock>(redis, std::move(key), std::move(token), mode);
}

}  // namespace rlock
