#include "lock.h"

#include "cluster.h"
#include "lock_kinds.h"
#include "lock_value.h"
#include "scripts.h"

namespace rlock {

std::string helper_key(std::string_view key, std::string_view kind) {
  std::string suffix = ":rlock:" + std::string(kind);
  if (hash_tag(key) || key.find('}') != std::string_view::npos) return std::string(key) + suffix;
  return "{" + std::string(key) + "}" + suffix;
}

bool is_helper_key(std::string_view key) {
  size_t at = key.rfind(":rlock:");
  if (at == std::string_view::npos) return false;
  std::string_view kind = key.substr(at + 7);
  for (std::string_view k : {"fence", "queue", "alive", "sem", "holders", "history"})
    if (kind == k) return true;
  return kind.substr(0, 5) == "wake-" || kind.substr(0, 5) == "once:";
}

Result<Broken> break_lock(Redis& redis, const std::string& key) {
  auto reply =
      eval(redis, scripts::break_lock, {key, helper_key(key, "queue"), helper_key(key, "alive")},
           {helper_key(key, "wake-")}, Clock::now() + redis.command_timeout());
  if (!reply) return reply.failure();
  const auto& e = reply->elements;
  if (!reply->is_array() || e.empty()) return unexpected_reply("the break script");
  Broken b{e[0].str, "", Millis(-2)};
  if (e.size() == 3) {
    b.value = e[1].str;
    b.pttl = Millis(e[2].integer);
  }
  return b;
}

std::unique_ptr<Lock> make_lock(Redis& redis, std::string key, std::string token, LockMode mode) {
  if (redis.node_count() > 1)
    return make_quorum_lock(redis, std::move(key), std::move(token), mode);
  if (mode.limit > 0) return make_semaphore_lock(redis, std::move(key), std::move(token), mode);
  return make_mutex_lock(redis, std::move(key), std::move(token), mode);
}

Lock::Lock(Redis& redis, std::string key, std::string token, LockMode mode)
    : redis_(redis), key_(std::move(key)), token_(std::move(token)), mode_(mode),
      owner_prefix_(owner_prefix(token_)), fence_key_(helper_key(key_, "fence")),
      queue_key_(helper_key(key_, "queue")), alive_key_(helper_key(key_, "alive")),
      wake_prefix_(helper_key(key_, "wake-")), wake_key_(wake_prefix_ + token_) {}

Result<Unit> Lock::leave_queue(TimePoint deadline) {
  auto reply = eval(redis_, scripts::leave_queue, {queue_key_, alive_key_}, {token_, wake_prefix_},
                    deadline);
  if (!reply) return reply.failure();
  return Unit{};
}

Result<AcquireOutcome> Lock::acquire_outcome(Result<Reply> reply, const std::string& state_key,
                                             Millis ttl, TimePoint deadline) {
  if (!reply) return reply.failure();
  const auto& e = reply->elements;
  if (!reply->is_array() || e.size() < 2 || !e[0].is_integer())
    return unexpected_reply("the acquire script");
  switch (e[0].integer) {
  case 1: {
    if (!e[1].is_integer()) break;
    if (auto short_of = replicated(state_key, ttl, deadline)) {
      (void)release(deadline);  // the command will not run on it: give it back
      return *short_of;
    }
    return AcquireOutcome{Acquired{e[1].integer}};
  }
  case 0:
    if (e.size() != 4 || !e[1].is_string() || !e[2].is_integer() || !e[3].is_integer()) break;
    return AcquireOutcome{Busy{e[1].str, Millis(e[2].integer), Millis(e[3].integer)}};
  case -1: return AcquireOutcome{WrongType{e[1].str}};
  }
  return unexpected_reply("the acquire script");
}

Result<bool> Lock::renew_outcome(Result<Reply> reply, const std::string& state_key, Millis ttl,
                                 TimePoint deadline) {
  auto renewed = integer_result(std::move(reply), "the renew script");
  if (renewed && *renewed) {
    if (auto short_of = replicated(state_key, ttl, deadline)) return *short_of;
  }
  return renewed;
}

Result<bool> Lock::release_outcome(Result<std::vector<Reply>> replies,
                                   std::vector<Reply>* then_replies) {
  if (!replies) return replies.failure();
  if (then_replies)
    then_replies->assign(std::make_move_iterator(replies->begin() + 1),
                         std::make_move_iterator(replies->end()));
  return integer_result(std::move(replies->front()), "the release script");
}

std::optional<Failure> Lock::replicated(const std::string& state_key, Millis ttl,
                                        TimePoint deadline) {
  if (mode_.min_replicas <= 0) return std::nullopt;
  // WAIT counts the replicas that have every write this connection made; PTTL of the lock's
  // own key first routes it to the lock's node in a Cluster.
  std::string wait_ms = std::to_string(replica_wait(ttl).count());
  auto replies = redis_.pipeline(
      {{"PTTL", state_key}, {"WAIT", std::to_string(mode_.min_replicas), wait_ms}}, deadline);
  if (!replies) return replies.failure();
  const Reply& acks = (*replies)[1];
  if (acks.type == Reply::Type::error) return redis_.server_failure(acks.str);
  if (!acks.is_integer()) return unexpected_reply("WAIT");
  if (acks.integer >= mode_.min_replicas) return std::nullopt;
  // Not a refusal: replicas catch up (after a failover, a restart), so waiters try again.
  return Failure{Failure::Kind::timeout,
                 redis_.name() + ": " + std::to_string(acks.integer) + " of the " +
                     std::to_string(mode_.min_replicas) +
                     " replicas --min-replicas asks for acknowledged the lock within " + wait_ms +
                     " ms",
                 "", Failure::Why::too_few_replicas};
}

Result<bool> integer_result(Result<Reply> reply, const char* what) {
  if (!reply) return reply.failure();
  if (!reply->is_integer()) return unexpected_reply(what);
  return reply->integer == 1;
}

}  // namespace rlock
