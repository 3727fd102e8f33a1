#include "lock/lock.h"

#include <algorithm>

#include "lock/history.h"
#include "lock/lock_kinds.h"
#include "lock/lock_value.h"
#include "lock/scripts.h"
#include "redis/cluster.h"

namespace rlock {

// Two keys never share a helper. A key without '}' is the whole tag ("{K}:rlock:KIND": the
// first '}' ends K); a key with one, which may carry its own tag, keeps it and ends in a
// separator that holds a brace pair ("K:rlock{}:KIND"). A name of the first form has one '}',
// one of the second at least two, so no name is of both forms; within the second, KIND holds
// no brace, so the last "{}" gives K back. Before, "{K}" (its own tag) had the helpers of K.
std::string helper_key(std::string_view key, std::string_view kind) {
  if (key.find('}') != std::string_view::npos)
    return std::string(key) + std::string(k_braced_separator) + std::string(kind);
  return "{" + std::string(key) + "}" + std::string(k_helper_separator) + std::string(kind);
}

std::string kept_output_key(std::string_view key, std::string_view kind) {
  return std::string(k_kept_output_prefix) + helper_key(key, kind);
}

bool is_helper_key(std::string_view key) {
  size_t plain = key.rfind(k_helper_separator), braced = key.rfind(k_braced_separator);
  size_t at = plain == std::string_view::npos                      ? braced
              : braced == std::string_view::npos || plain > braced ? plain
                                                                   : braced;
  if (at == std::string_view::npos) return false;
  std::string_view kind =
      key.substr(at + (at == plain ? k_helper_separator : k_braced_separator).size());
  for (std::string_view k :
       {"fence", "queue", "alive", "sem", "holders", "history", "ended", "shared", "shared-values",
        "shared-waiters", "pause", "outputs", "last-success", "phase", "last-output"})
    if (kind == k) return true;
  for (std::string_view prefix : {"wake-", "once:", "stop-", "stopping-", "output-"})
    if (kind.starts_with(prefix)) return true;
  return false;
}

namespace {

Broken::What what_of(const std::string& word) {
  if (word == "broken") return Broken::What::broken;
  if (word == "deleted") return Broken::What::deleted;
  if (word == "already") return Broken::What::already;
  if (word == "no-expiry") return Broken::What::no_expiry;
  return Broken::What::other;
}

// The reply of break_lock.lua: {type} or {type, value, pttl, what}.
Result<BreakOutcome> lock_broken(const Reply& reply) {
  const auto& e = reply.elements;
  if (!reply.is_array() || (e.size() != 1 && e.size() != 4)) return unexpected_reply("break_lock");
  BreakOutcome out{e[0].str, {}, 0};
  if (e.size() == 4)
    out.broken.push_back(Broken{"", e[1].str, Millis(e[2].integer), what_of(e[3].str)});
  return out;
}

// The reply of break_slots.lua: {type}, {type, 'choose', places} or {type, 'done', 4 x N}.
Result<BreakOutcome> slots_broken(const Reply& reply) {
  const auto& e = reply.elements;
  if (!reply.is_array() || e.empty()) return unexpected_reply("break_slots");
  BreakOutcome out{e[0].str, {}, 0};
  if (e.size() == 1) return out;
  if (e[1].str == "choose" && e.size() == 3) {
    out.places = static_cast<int>(e[2].integer);
    return out;
  }
  if (e[1].str != "done" || (e.size() - 2) % 4 != 0) return unexpected_reply("break_slots");
  for (size_t i = 2; i < e.size(); i += 4)
    out.broken.push_back(
        Broken{e[i].str, e[i + 1].str, Millis(e[i + 2].integer), what_of(e[i + 3].str)});
  return out;
}

}  // namespace

Result<BreakOutcome> break_lock(Redis& redis, const std::string& key, const BreakRequest& request) {
  TimePoint deadline = Clock::now() + redis.command_timeout();
  std::string breaker = tombstone_fields(request.reason);
  std::string wake_prefix = helper_key(key, "wake-");
  Argv lock_keys{key, helper_key(key, "queue"), helper_key(key, "alive")};
  Argv lock_args{wake_prefix, breaker, request.token, request.now ? "1" : "0"};
  if (redis.node_count() > 1) {
    // Redlock: a tombstone on each node that holds the lock, each as long as its own lock had
    // left. Report the one that lasts longest: it is when the lock can be taken again.
    std::optional<BreakOutcome> longest;
    std::optional<Failure> failure;
    for (auto& reply :
         eval_on_all(redis, scripts::break_lock, lock_keys, lock_args, deadline, Enough{})) {
      auto one = reply ? lock_broken(*reply) : Result<BreakOutcome>(reply.failure());
      if (!one) {
        failure = one.failure();
      } else if (!longest || (longest->broken.empty() && !one->broken.empty()) ||
                 (!one->broken.empty() && one->broken[0].pttl > longest->broken[0].pttl)) {
        longest = std::move(*one);
      }
    }
    if (!longest) return *failure;
    return *longest;
  }
  auto reply = eval(redis, scripts::break_lock, lock_keys, lock_args, deadline);
  if (!reply) return reply.failure();
  auto lock = lock_broken(*reply);
  if (!lock || lock->type != "none") return lock;
  // No lock key: perhaps a semaphore's places, or a shared lock's (break_slots.lua is the
  // same for both: each place a tombstone until its holder has surely stopped).
  for (auto [places, values] :
       {std::pair{"sem", "holders"}, std::pair{"shared", "shared-values"}}) {
    reply = eval(
        redis, scripts::break_slots,
        {helper_key(key, places), helper_key(key, values), helper_key(key, "queue"),
         helper_key(key, "alive")},
        {wake_prefix, breaker, request.token, request.all ? "1" : "0", request.now ? "1" : "0"},
        deadline);
    if (!reply) return reply.failure();
    auto slots = slots_broken(*reply);
    if (!slots || slots->type != "none") {
      if (slots) slots->shared = std::string_view(places) == "shared";
      return slots;
    }
  }
  return BreakOutcome{"none", {}, 0};
}

std::unique_ptr<Lock> make_lock(Redis& redis, std::string key, std::string token, LockMode mode) {
  if (redis.node_count() > 1)
    return make_quorum_lock(redis, std::move(key), std::move(token), mode);
  if (mode.limit > 0) return make_semaphore_lock(redis, std::move(key), std::move(token), mode);
  if (mode.shared) return make_shared_lock(redis, std::move(key), std::move(token), mode);
  return make_mutex_lock(redis, std::move(key), std::move(token), mode);
}

Result<std::optional<Breaking>> broken_by(Redis& redis, const std::string& key,
                                          const std::string& token, TimePoint deadline) {
  auto replies = redis.pipeline({{"GET", key},
                                 {"HGET", helper_key(key, "holders"), "broken-" + token},
                                 {"HGET", helper_key(key, "shared-values"), "broken-" + token}},
                                deadline);
  if (!replies) return replies.failure();
  for (const Reply& r : *replies) {
    auto value = r.is_string() ? decode_lock_value(r.str) : std::nullopt;
    if (value && value->broken && value->token == token) return value->broken;
  }
  return std::optional<Breaking>{};
}

Lock::Lock(Redis& redis, std::string key, std::string token, LockMode mode)
    : redis_(redis), key_(std::move(key)), token_(std::move(token)), mode_(mode),
      owner_prefix_(owner_prefix(token_)), fence_key_(helper_key(key_, "fence")),
      queue_key_(helper_key(key_, "queue")), alive_key_(helper_key(key_, "alive")),
      wake_prefix_(helper_key(key_, "wake-")), wake_key_(wake_prefix_ + token_),
      ends_key_(helper_key(key_, "ended")), shared_key_(helper_key(key_, "shared")),
      shared_values_key_(helper_key(key_, "shared-values")), phase_key_(helper_key(key_, "phase")),
      pause_key_(helper_key(key_, "pause")) {}

void Lock::add_phase(Argv& keys, Argv& args, const PhaseUpdate& phase) const {
  using Op = PhaseUpdate::Op;
  if (phase.op == Op::none) return;
  keys.push_back(phase_key_);
  args.push_back(phase.op == Op::set ? "set" : phase.op == Op::clear ? "clear" : "keep");
  if (phase.op != Op::set) return;
  args.push_back(phase.text);
  args.push_back(std::to_string(std::max<int64_t>(0, phase.ago.count())));
  args.push_back(std::to_string(std::max<int64_t>(0, phase.due_in.count())));
}

Result<Unit> Lock::leave_queue(TimePoint deadline) {
  auto reply = eval(redis_, scripts::leave_queue, {queue_key_, alive_key_}, {token_, wake_prefix_},
                    deadline);
  if (!reply) return reply.failure();
  return Unit{};
}

void Lock::add_start(Argv& keys, Argv& args) const {
  if (!start_ || start_->max_length <= 0) return;
  keys.push_back(helper_key(key_, "history"));
  args.push_back(std::to_string(start_->max_length));
  args.push_back(std::to_string(start_->retention.count()));
  args.insert(args.end(), start_->fields.begin(), start_->fields.end());
  auto waited = std::chrono::duration_cast<Millis>(Clock::now() - start_->wait_began);
  args.push_back("waited_ms");
  args.push_back(std::to_string(std::max<int64_t>(0, waited.count())));
}

Result<AcquireOutcome> Lock::acquire_outcome(Result<Reply> reply, const std::string& state_key,
                                             Millis ttl, TimePoint deadline) {
  if (!reply) return reply.failure();
  const auto& e = reply->elements;
  if (!reply->is_array() || e.size() < 2 || !e[0].is_integer())
    return unexpected_reply("the acquire script");
  switch (e[0].integer) {
  case 1: {
    if (!e[1].is_integer() || e.size() != 4 || !e[2].is_integer() || !e[3].is_string()) break;
    Acquired got{e[1].integer, e[2].integer, e[3].str};
    if (auto short_of = replicated(state_key, ttl, deadline)) {
      // The command will not run on it: give it back, and its start entry with it.
      std::vector<ScriptCall> forget;
      if (!got.start.empty()) forget.push_back(history_forget(key_, token_, got.start));
      (void)release(deadline, forget, nullptr);
      return *short_of;
    }
    return AcquireOutcome{got};
  }
  case 2:
    // Paused (rlock pause): the pause's text in place of a holder's value (and, for a shared
    // place, no sharers).
    if (e.size() < 4 || e.size() > 5 || !e[1].is_string() || !e[2].is_integer() ||
        !e[3].is_integer())
      break;
    return AcquireOutcome{Busy{e[1].str, Millis(e[2].integer), Millis(e[3].integer), 0, true}};
  case 0:
    // A fifth element: the shared holders that keep us out (--shared).
    if (e.size() < 4 || e.size() > 5 || !e[1].is_string() || !e[2].is_integer() ||
        !e[3].is_integer() || (e.size() == 5 && !e[4].is_integer()))
      break;
    return AcquireOutcome{Busy{e[1].str, Millis(e[2].integer), Millis(e[3].integer),
                               e.size() == 5 ? e[4].integer : 0}};
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
