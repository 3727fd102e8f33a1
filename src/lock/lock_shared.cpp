// A shared lock (--shared, flock -s): any number of holders at once, each a place with its own
// token and expiry in {KEY}:rlock:shared, their values in {KEY}:rlock:shared-values; or, as
// always, one holder alone under KEY itself (the mutex, lock_mutex.cpp). The two keep each
// other out in their acquire scripts, and a waiter that wants the lock alone is not starved by
// a stream of shared holders (src/lua/sharing.lua). A place renews and answers "do I hold it"
// as a semaphore's slot does (the same scripts on these keys); KEY itself is never written.
#include "lock/lock_kinds.h"
#include "lock/scripts.h"

namespace rlock {

namespace {

class SharedLock final : public PlaceLock {
public:
  SharedLock(Redis& redis, std::string key, std::string token, LockMode mode)
      : PlaceLock(redis, std::move(key), std::move(token), mode, "shared", "shared-values"),
        sharing_key_(helper_key(key_, "shared-waiters")) {}

  Result<AcquireOutcome> try_acquire(const std::string& value, Millis ttl,
                                     const std::optional<WaitPlan>& wait,
                                     TimePoint deadline) override {
    Argv keys{key_,       places_key_, values_key_,  fence_key_,
              queue_key_, alive_key_,  sharing_key_, pause_key_};
    Argv args{value,
              std::to_string(ttl.count()),
              token_,
              wake_prefix_,
              std::to_string(wait ? wait->max_block.count() : 0),
              std::to_string(wait ? wait->fallback.count() : 0),
              std::to_string(mode_.retention.count())};
    add_start(keys, args);
    auto reply = eval(redis_, scripts::shared_acquire, keys, args, deadline);
    return acquire_outcome(std::move(reply), places_key_, ttl, deadline);
  }

  Result<bool> release(TimePoint deadline, const std::vector<ScriptCall>& then,
                       std::vector<Reply>* then_replies) override {
    auto replies = eval_then(redis_, scripts::shared_release,
                             {places_key_, values_key_, queue_key_, alive_key_, ends_key_,
                              phase_key_},
                             {token_, wake_prefix_}, then, deadline);
    return release_outcome(std::move(replies), then_replies);
  }

  // Also unmarks us as a waiter that shares.
  Result<Unit> leave_queue(TimePoint deadline) override {
    auto reply = eval(redis_, scripts::leave_queue, {queue_key_, alive_key_, sharing_key_},
                      {token_, wake_prefix_}, deadline);
    if (!reply) return reply.failure();
    return Unit{};
  }

private:
  const std::string sharing_key_;  // the waiters that share: shared_acquire.lua marks us there
};

}  // namespace

std::unique_ptr<Lock> make_shared_lock(Redis& redis, std::string key, std::string token,
                                       LockMode mode) {
  return std::make_unique<SharedLock>(redis, std::move(key), std::move(token), mode);
}

}  // namespace rlock
