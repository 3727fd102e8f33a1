// The plain lock: KEY holds its holder's value (with the fence) and expires with the lease.
#include "lock/lock_kinds.h"
#include "lock/scripts.h"

namespace rlock {

namespace {

class MutexLock final : public Lock {
public:
  MutexLock(Redis& redis, std::string key, std::string token, LockMode mode)
      : Lock(redis, std::move(key), std::move(token), mode) {}

  Result<AcquireOutcome> try_acquire(const std::string& value, Millis ttl,
                                     const std::optional<WaitPlan>& wait,
                                     TimePoint deadline) override {
    Argv keys{key_,        fence_key_,         queue_key_, alive_key_,
              shared_key_, shared_values_key_, pause_key_};
    Argv args{value,
              std::to_string(ttl.count()),
              owner_prefix_,
              token_,
              wake_prefix_,
              mode_.fair ? "1" : "0",
              std::to_string(wait ? wait->max_block.count() : 0),
              std::to_string(wait ? wait->fallback.count() : 0),
              std::to_string(mode_.retention.count()),
              may_be_queued_ ? "1" : "0"};
    if (wait && wait->max_block.count() > 0) may_be_queued_ = true;
    add_start(keys, args);
    auto reply = eval(redis_, scripts::acquire, keys, args, deadline);
    return acquire_outcome(std::move(reply), key_, ttl, deadline);
  }

  Result<bool> renew(Millis ttl, TimePoint deadline, const PhaseUpdate& phase) override {
    Argv keys{key_, fence_key_};
    Argv args{owner_prefix_, std::to_string(ttl.count()), std::to_string(mode_.retention.count())};
    add_phase(keys, args, phase);
    return renew_outcome(eval(redis_, scripts::renew, keys, args, deadline), key_, ttl, deadline);
  }

  Result<bool> release(TimePoint deadline, const std::vector<ScriptCall>& then,
                       std::vector<Reply>* then_replies) override {
    // The run's history entry rides in the release script itself (release.lua): the end of a
    // run is one script for Redis to run, not two.
    if (then.size() == 1 && then[0].script == &scripts::history_add && then[0].keys.size() >= 2 &&
        then[0].keys[1] == ends_key_) {
      const ScriptCall& entry = then[0];
      ScriptCall call{&scripts::release,
                      {key_, queue_key_, alive_key_, ends_key_, phase_key_, entry.keys[0]},
                      {owner_prefix_, wake_prefix_},
                      entry.with_source};
      // The newest success's entry (history_entry()), kept beside the history.
      if (entry.keys.size() > 2) call.keys.push_back(entry.keys[2]);
      call.args.insert(call.args.end(), entry.args.begin(), entry.args.end());
      auto reply = eval(redis_, call, deadline);
      if (!reply) return reply.failure();
      if (!reply->is_array() || reply->elements.size() != 2)
        return unexpected_reply("the release script");
      if (then_replies) then_replies->assign(1, std::move(reply->elements[1]));
      return integer_result(std::move(reply->elements[0]), "the release script");
    }
    auto replies =
        eval_then(redis_, scripts::release, {key_, queue_key_, alive_key_, ends_key_, phase_key_},
                  {owner_prefix_, wake_prefix_}, then, deadline);
    return release_outcome(std::move(replies), then_replies);
  }

  Result<bool> holds(TimePoint deadline) override {
    auto value = redis_.call({"GET", key_}, deadline);
    if (!value) {
      if (value.failure().code == "WRONGTYPE") return false;
      return value.failure();
    }
    return value->is_string() && value->str.starts_with(owner_prefix_);
  }
};

}  // namespace

std::unique_ptr<Lock> make_mutex_lock(Redis& redis, std::string key, std::string token,
                                      LockMode mode) {
  return std::make_unique<MutexLock>(redis, std::move(key), std::move(token), mode);
}

}  // namespace rlock
