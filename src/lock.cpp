#include "lock.h"

#include <algorithm>

#include "lease.h"
#include "lock_value.h"
#include "redlock.h"

namespace rlock {

namespace {

// Lua shared by the scripts below.
//
// Time is the server's (TIME), the clock Redis expires keys by, so a semaphore slot ends when a
// lock key with the same ttl would.
//
// Waiting: a waiter that finds the lock busy joins the queue and BLPOPs its own wake-up list.
// A release pushes to the list of the first live waiter only: one release wakes one waiter,
// and a release that happens before the waiter blocks is not lost (the element waits in the
// list). A waiter's place lasts as long as it said it would block, plus a margin of 1.5 s; one
// that died is pruned, so the queue never wedges behind it (--fair waiters block at most
// 500 ms at a time, so a dead one holds up a free lock for at most 2 s).
constexpr char k_lua_common[] = R"lua(
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function prune_waiters(queue, alive, now)
  local dead = redis.call('ZRANGEBYSCORE', alive, '-inf', now, 'LIMIT', 0, 1000)
  if #dead > 0 then
    redis.call('ZREM', queue, unpack(dead))
    redis.call('ZREM', alive, unpack(dead))
  end
end

local function wake_first(queue, alive, wake_prefix, now)
  prune_waiters(queue, alive, now)
  local first = redis.call('ZRANGE', queue, 0, 0)[1]
  if first then
    -- pcall: under maxmemory with noeviction LPUSH is refused, and the release must stand
    -- anyway (the waiter then wakes at its fallback, the old holder's expiry).
    local list = wake_prefix .. first
    if type(redis.pcall('LPUSH', list, '1')) == 'number' then
      redis.call('LTRIM', list, 0, 0)
      redis.call('PEXPIRE', list, 60000)
    end
  end
end

local function dequeue(queue, alive, wake_prefix, token)
  redis.call('ZREM', queue, token)
  redis.call('ZREM', alive, token)
  redis.call('DEL', wake_prefix .. token)
end

-- How long a waiter blocks before it looks again: until the holder's expiry when the holder is
-- rlock (it wakes us on release), at most FALLBACK when it is other software (it does not).
local function block_for(value, pttl, max_block, fallback)
  local b = fallback
  if value and string.sub(value, 1, 8) == 'rlock/1 ' and pttl >= 0 then
    b = pttl + 1
  elseif pttl >= 0 then
    b = math.min(pttl + 1, fallback)
  end
  return math.max(1, math.min(b, max_block))
end

local function enqueue(queue, alive, token, now, block)
  local t = redis.call('TIME')
  redis.call('ZADD', queue, 'NX', t[1] * 1000000 + t[2], token)
  redis.call('ZADD', alive, now + block + 1500, token)
  local last = redis.call('ZRANGE', alive, -1, -1, 'WITHSCORES')[2]
  local keep = math.max(1000, tonumber(last) - now + 1000)
  redis.call('PEXPIRE', queue, keep)
  redis.call('PEXPIRE', alive, keep)
end

-- The answer to a caller that did not get the lock: who holds it (value, pttl) and, when it
-- waits (MAX_BLOCK > 0), how long to block; a waiter joins the queue here.
local function busy(queue, alive, token, now, value, pttl, max_block, fallback)
  local block = 0
  if max_block > 0 then
    block = block_for(value, pttl, max_block, fallback)
    enqueue(queue, alive, token, now, block)
  end
  return {0, value or '', pttl, block}
end
)lua";

// Mutex acquire. KEYS: lock, fence, queue, alive. ARGV: value (without fence), ttl, owner
// prefix, token, wake prefix, fair, max block (0: not waiting), fallback.
// Taking the lock and drawing its fence are one step: no fence number is spent on a failed
// attempt, and nobody sees the lock without its fence. pcall on GET turns a key of another
// type into a clean answer instead of a script error.
constexpr auto k_acquire = lua_script(k_lua_common, R"lua(
local now = now_ms()
prune_waiters(KEYS[3], KEYS[4], now)
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' then return {-1, redis.call('TYPE', KEYS[1])['ok']} end
if v and string.sub(v, 1, #ARGV[3]) == ARGV[3] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  dequeue(KEYS[3], KEYS[4], ARGV[5], ARGV[4])
  return {1, tonumber(string.match(v, ' fence=(%d+)$') or '0')}
end
local pttl = -2
local turn = true
if v then
  pttl = redis.call('PTTL', KEYS[1])
elseif ARGV[6] == '1' then
  local first = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
  turn = first == nil or first == ARGV[4]
  -- Not our turn on a free lock: look again when the first waiter's place lapses, should it
  -- have died, rather than after the fallback.
  if not turn then
    pttl = math.max(0, tonumber(redis.call('ZSCORE', KEYS[4], first) or now) - now)
  end
end
if not v and turn then
  local fence = redis.call('INCR', KEYS[2])
  redis.call('SET', KEYS[1], ARGV[1] .. ' fence=' .. fence, 'PX', ARGV[2])
  dequeue(KEYS[3], KEYS[4], ARGV[5], ARGV[4])
  return {1, fence}
end
return busy(KEYS[3], KEYS[4], ARGV[4], now, v, pttl, tonumber(ARGV[7]), tonumber(ARGV[8]))
)lua");

// Compare-then-PEXPIRE in one step: between a client's GET and PEXPIRE our lock could expire
// and be taken by another holder, whose lock we would then extend. KEYS: lock. ARGV: owner
// prefix, ttl.
constexpr auto k_renew = lua_script(R"lua(
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'string' and string.sub(v, 1, #ARGV[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
)lua");

// Compare-then-DEL in one step, for the same race: a plain DEL (or GET then DEL) can delete
// the lock of the holder who took over after ours expired. KEYS: lock, queue, alive.
// ARGV: owner prefix, wake prefix.
constexpr auto k_release = lua_script(k_lua_common, R"lua(
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'string' and string.sub(v, 1, #ARGV[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  wake_first(KEYS[2], KEYS[3], ARGV[2], now_ms())
  return 1
end
return 0
)lua");

// Semaphore: up to LIMIT holders, each with its own token and expiry (server time), in one
// zset; their values in a hash. An expired holder's slot is reclaimed at the next look.
constexpr char k_lua_semaphore[] = R"lua(
local function expire_holders(sem, holders, now)
  local gone = redis.call('ZRANGEBYSCORE', sem, '-inf', now, 'LIMIT', 0, 1000)
  if #gone > 0 then
    redis.call('ZREM', sem, unpack(gone))
    redis.call('HDEL', holders, unpack(gone))
  end
end

-- The semaphore's keys live as long as its longest holder.
local function keep_semaphore(sem, holders, now)
  local last = redis.call('ZRANGE', sem, -1, -1, 'WITHSCORES')[2]
  if last then
    local keep = math.max(1, tonumber(last) - now)
    redis.call('PEXPIRE', sem, keep)
    redis.call('PEXPIRE', holders, keep)
  end
end
)lua";

// KEYS: sem, holders, fence, queue, alive. ARGV: value, ttl, token, wake prefix, fair,
// max block, fallback, limit.
constexpr auto k_acquire_semaphore = lua_script(k_lua_common, k_lua_semaphore, R"lua(
local now = now_ms()
prune_waiters(KEYS[4], KEYS[5], now)
expire_holders(KEYS[1], KEYS[2], now)
if redis.call('TYPE', KEYS[1])['ok'] ~= 'zset' and redis.call('EXISTS', KEYS[1]) == 1 then
  return {-1, redis.call('TYPE', KEYS[1])['ok']}
end
local ttl = tonumber(ARGV[2])
if redis.call('ZSCORE', KEYS[1], ARGV[3]) then
  redis.call('ZADD', KEYS[1], 'XX', now + ttl, ARGV[3])
  keep_semaphore(KEYS[1], KEYS[2], now)
  dequeue(KEYS[4], KEYS[5], ARGV[4], ARGV[3])
  local v = redis.call('HGET', KEYS[2], ARGV[3]) or ''
  return {1, tonumber(string.match(v, ' fence=(%d+)$') or '0')}
end
local free = tonumber(ARGV[8]) - redis.call('ZCARD', KEYS[1])
local turn = free > 0
if turn and ARGV[5] == '1' then
  -- In arrival order: the first FREE waiters may take a slot, a newcomer only past them all.
  local rank = redis.call('ZRANK', KEYS[4], ARGV[3])
  if rank then turn = rank < free else turn = redis.call('ZCARD', KEYS[4]) < free end
end
if turn then
  local fence = redis.call('INCR', KEYS[3])
  redis.call('ZADD', KEYS[1], now + ttl, ARGV[3])
  redis.call('HSET', KEYS[2], ARGV[3], ARGV[1] .. ' fence=' .. fence)
  keep_semaphore(KEYS[1], KEYS[2], now)
  dequeue(KEYS[4], KEYS[5], ARGV[4], ARGV[3])
  return {1, fence}
end
-- Busy: report the holder whose slot frees first.
local v, pttl = false, -2
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if first[1] then
  v = redis.call('HGET', KEYS[2], first[1])
  pttl = math.max(0, tonumber(first[2]) - now)
end
return busy(KEYS[4], KEYS[5], ARGV[3], now, v, pttl, tonumber(ARGV[6]), tonumber(ARGV[7]))
)lua");

// KEYS: sem, holders. ARGV: token, ttl.
constexpr auto k_renew_semaphore = lua_script(k_lua_common, k_lua_semaphore, R"lua(
local now = now_ms()
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not s or tonumber(s) <= now then return 0 end
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
keep_semaphore(KEYS[1], KEYS[2], now)
return 1
)lua");

// KEYS: sem, holders, queue, alive. ARGV: token, wake prefix.
constexpr auto k_release_semaphore = lua_script(k_lua_common, k_lua_semaphore, R"lua(
local now = now_ms()
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
if not s or tonumber(s) <= now then return 0 end
wake_first(KEYS[3], KEYS[4], ARGV[2], now)
return 1
)lua");

// A waiter that gives up leaves the queue; if it was first in line, the next one is woken in
// its place, in case the wake-up it will not use was meant to hand it the lock.
// KEYS: queue, alive. ARGV: token, wake prefix.
constexpr auto k_leave = lua_script(k_lua_common, R"lua(
local first = redis.call('ZRANGE', KEYS[1], 0, 0)[1]
dequeue(KEYS[1], KEYS[2], ARGV[2], ARGV[1])
if first == ARGV[1] then wake_first(KEYS[1], KEYS[2], ARGV[2], now_ms()) end
return 1
)lua");

// KEYS: sem. ARGV: token.
constexpr auto k_holds_semaphore = lua_script(k_lua_common, R"lua(
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
return (s and tonumber(s) > now_ms()) and 1 or 0
)lua");

// Reading and deleting are one step, so the value reported is exactly the one deleted.
// KEYS: lock, queue, alive. ARGV: wake prefix.
constexpr auto k_break = lua_script(k_lua_common, R"lua(
local t = redis.call('TYPE', KEYS[1])['ok']
if t ~= 'string' then return {t} end
local v = redis.call('GET', KEYS[1])
local pttl = redis.call('PTTL', KEYS[1])
redis.call('DEL', KEYS[1])
wake_first(KEYS[2], KEYS[3], ARGV[1], now_ms())
return {t, v, pttl}
)lua");

// Cluster hashes only the part between the first '{' and the next '}', when it is not empty.
bool has_hash_tag(std::string_view key) {
  size_t open = key.find('{');
  if (open == std::string_view::npos) return false;
  size_t close = key.find('}', open + 1);
  return close != std::string_view::npos && close > open + 1;
}

Failure unexpected_reply(const std::string& what) {
  return Failure{Failure::Kind::protocol, "unexpected reply to " + what};
}

Result<bool> integer_result(Result<Reply> reply, const char* what) {
  if (!reply) return reply.failure();
  if (!reply->is_integer()) return unexpected_reply(what);
  return reply->integer == 1;
}

}  // namespace

std::string helper_key(std::string_view key, std::string_view kind) {
  std::string suffix = ":rlock:" + std::string(kind);
  if (has_hash_tag(key) || key.find('}') != std::string_view::npos)
    return std::string(key) + suffix;
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
  auto reply = eval(redis, k_break, {key, helper_key(key, "queue"), helper_key(key, "alive")},
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

Lock::Lock(Redis& redis, std::string key, std::string token, LockMode mode)
    : redis_(redis), key_(std::move(key)), token_(std::move(token)), mode_(mode),
      prefix_(owner_prefix(token_)), fence_key_(helper_key(key_, "fence")),
      queue_key_(helper_key(key_, "queue")), alive_key_(helper_key(key_, "alive")),
      wake_prefix_(helper_key(key_, "wake-")), wake_key_(wake_prefix_ + token_),
      sem_key_(helper_key(key_, "sem")), holders_key_(helper_key(key_, "holders")) {}

Result<AcquireOutcome> Lock::try_acquire(const std::string& value, Millis ttl,
                                         const std::optional<WaitPlan>& wait, TimePoint deadline) {
  if (redis_.node_count() > 1) return quorum_acquire(value, ttl, deadline);
  std::string fair = mode_.fair ? "1" : "0";
  std::string max_block = std::to_string(wait ? wait->max_block.count() : 0);
  std::string fallback = std::to_string(wait ? wait->fallback.count() : 0);
  Result<Reply> reply = mode_.limit > 0
                            ? eval(redis_, k_acquire_semaphore,
                                   {sem_key_, holders_key_, fence_key_, queue_key_, alive_key_},
                                   {value, std::to_string(ttl.count()), token_, wake_prefix_, fair,
                                    max_block, fallback, std::to_string(mode_.limit)},
                                   deadline)
                            : eval(redis_, k_acquire, {key_, fence_key_, queue_key_, alive_key_},
                                   {value, std::to_string(ttl.count()), prefix_, token_,
                                    wake_prefix_, fair, max_block, fallback},
                                   deadline);
  if (!reply) return reply.failure();
  const auto& e = reply->elements;
  if (!reply->is_array() || e.size() < 2 || !e[0].is_integer())
    return unexpected_reply("the acquire script");
  switch (e[0].integer) {
  case 1: {
    if (!e[1].is_integer()) break;
    if (auto short_of = replicated(ttl, deadline)) {
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

Result<bool> Lock::renew(Millis ttl, TimePoint deadline) {
  std::string ms = std::to_string(ttl.count());
  if (redis_.node_count() > 1)
    return quorum_verdict(eval_on_all(redis_, k_renew, {key_}, {prefix_, ms}, deadline), "renewed");
  auto renewed =
      integer_result(mode_.limit > 0 ? eval(redis_, k_renew_semaphore, {sem_key_, holders_key_},
                                            {token_, ms}, deadline)
                                     : eval(redis_, k_renew, {key_}, {prefix_, ms}, deadline),
                     "the renew script");
  if (renewed && *renewed) {
    // Not renewed until the replicas have it: a failover would lose the longer ttl.
    if (auto short_of = replicated(ttl, deadline)) return *short_of;
  }
  return renewed;
}

std::optional<Failure> Lock::replicated(Millis ttl, TimePoint deadline) {
  if (mode_.min_replicas <= 0) return std::nullopt;
  // WAIT counts the replicas that have every write this connection made; PTTL of the lock's
  // own key first routes it to the lock's node in a Cluster.
  std::string wait_ms = std::to_string(replica_wait(ttl).count());
  auto replies = redis_.pipeline({{"PTTL", mode_.limit > 0 ? sem_key_ : key_},
                                  {"WAIT", std::to_string(mode_.min_replicas), wait_ms}},
                                 deadline);
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
                 "NOREPLICAS"};
}

Result<bool> Lock::release(TimePoint deadline) { return release(deadline, {}, nullptr); }

Result<bool> Lock::release(TimePoint deadline, const std::vector<Argv>& then,
                           std::vector<Reply>* then_replies) {
  if (redis_.node_count() > 1) {
    // Every node, whatever the quorum said: one whose reply was lost may hold it too. THEN
    // is left unsent: it belongs on one node, where the caller sends it.
    auto replies = eval_on_all(redis_, k_release, {key_, queue_key_, alive_key_},
                               {prefix_, wake_prefix_}, deadline);
    std::optional<Failure> failure;
    bool released = false, answered = false;
    for (auto& r : replies) {
      if (!r) {
        failure = r.failure();
        continue;
      }
      answered = true;
      released = released || (r->is_integer() && r->integer == 1);
    }
    if (!answered && failure) return *failure;
    return released;
  }
  auto replies = mode_.limit > 0 ? eval_then(redis_, k_release_semaphore,
                                             {sem_key_, holders_key_, queue_key_, alive_key_},
                                             {token_, wake_prefix_}, then, deadline)
                                 : eval_then(redis_, k_release, {key_, queue_key_, alive_key_},
                                             {prefix_, wake_prefix_}, then, deadline);
  if (!replies) return replies.failure();
  if (then_replies)
    then_replies->assign(std::make_move_iterator(replies->begin() + 1),
                         std::make_move_iterator(replies->end()));
  return integer_result(std::move(replies->front()), "the release script");
}

Result<Unit> Lock::leave_queue(TimePoint deadline) {
  if (redis_.node_count() > 1) return Unit{};  // Redlock waiters poll; they never queue
  auto reply = eval(redis_, k_leave, {queue_key_, alive_key_}, {token_, wake_prefix_}, deadline);
  if (!reply) return reply.failure();
  return Unit{};
}

Result<bool> Lock::holds(TimePoint deadline) {
  if (redis_.node_count() > 1) {
    std::vector<Result<Reply>> found;
    for (auto& r : redis_.broadcast({{"GET", key_}}, deadline)) {
      if (!r) {
        found.push_back(r.failure());
        continue;
      }
      const Reply& v = r->front();
      found.push_back(Reply{
          Reply::Type::integer, v.is_string() && v.str.rfind(prefix_, 0) == 0 ? 1 : 0, "", {}});
    }
    return quorum_verdict(std::move(found), "held");
  }
  if (mode_.limit > 0)
    return integer_result(eval(redis_, k_holds_semaphore, {sem_key_}, {token_}, deadline),
                          "the holds script");
  auto value = redis_.call({"GET", key_}, deadline);
  if (!value) {
    if (value.failure().code == "WRONGTYPE") return false;
    return value.failure();
  }
  return value->is_string() && value->str.rfind(prefix_, 0) == 0;
}

}  // namespace rlock

namespace rlock {

Result<AcquireOutcome> Lock::quorum_acquire(const std::string& value, Millis ttl,
                                            TimePoint deadline) {
  TimePoint started = Clock::now();
  // Not waiting in the script: Redlock waiters poll (wait.cpp), so nobody queues on a node.
  auto replies = eval_on_all(
      redis_, k_acquire, {key_, fence_key_, queue_key_, alive_key_},
      {value, std::to_string(ttl.count()), prefix_, token_, wake_prefix_, "0", "0", "0"}, deadline);
  size_t acquired = 0;
  int64_t fence = 0;
  std::optional<Busy> busy;
  std::optional<WrongType> wrong;
  std::optional<Failure> failure;
  for (auto& r : replies) {
    if (!r) {
      failure = r.failure();
      continue;
    }
    const auto& e = r->elements;
    if (!r->is_array() || e.size() < 2 || !e[0].is_integer()) {
      failure = unexpected_reply("the acquire script");
    } else if (e[0].integer == 1 && e[1].is_integer()) {
      ++acquired;
      fence = std::max(fence, e[1].integer);
    } else if (e[0].integer == 0 && e.size() == 4 && !busy) {
      busy = Busy{e[1].str, Millis(e[2].integer), Millis(0)};
    } else if (e[0].integer == -1 && !wrong) {
      wrong = WrongType{e[1].str};
    }
  }
  size_t quorum = redlock_quorum(replies.size());
  // What is left of the lease once the nodes agreed: SPEC's validity.
  Millis validity =
      ttl - std::chrono::duration_cast<Millis>(Clock::now() - started) - lease_drift(ttl);
  if (acquired >= quorum && validity > Millis(0)) return AcquireOutcome{Acquired{fence}};
  // No quorum (or no time left in it): give back whatever we took, on every node.
  if (acquired > 0 || failure) (void)release(deadline);
  if (wrong) return AcquireOutcome{*wrong};
  std::string counts = std::to_string(acquired) + " of " + std::to_string(replies.size()) +
                       " Redis nodes (Redlock needs " + std::to_string(quorum) + ")";
  if (acquired >= quorum)
    return Failure{Failure::Kind::timeout,
                   "took the lock on " + counts + " too slowly: no validity left in the ttl"};
  if (busy) return AcquireOutcome{*busy};  // held by someone on some node: busy, not down
  return Failure{failure ? failure->kind : Failure::Kind::io,
                 "took the lock on only " + counts + ": " +
                     (failure ? failure->message : std::string("no quorum")),
                 failure ? failure->code : ""};
}

// A quorum of REPLIES (integers, 1 = yes) says yes: true. So many said no that no quorum can
// say yes: false. Neither (nodes that did not answer): the last failure.
Result<bool> Lock::quorum_verdict(std::vector<Result<Reply>> replies, const char* what) {
  size_t yes = 0, no = 0;
  std::optional<Failure> failure;
  for (auto& r : replies) {
    if (!r)
      failure = r.failure();
    else if (r->is_integer() && r->integer == 1)
      ++yes;
    else
      ++no;
  }
  size_t quorum = redlock_quorum(replies.size());
  if (yes >= quorum) return true;
  if (no > replies.size() - quorum) return false;
  return Failure{failure ? failure->kind : Failure::Kind::io,
                 std::string(what) + " on only " + std::to_string(yes) + " of " +
                     std::to_string(replies.size()) +
                     " Redis nodes: " + (failure ? failure->message : std::string("no quorum")),
                 failure ? failure->code : ""};
}

}  // namespace rlock
