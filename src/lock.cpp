#include "lock.h"

#include "lock_value.h"

namespace rlock {

namespace {

// Taking the lock and drawing its fence number are one atomic step: no fence number is spent on
// a failed attempt, and nobody can observe the lock without its fence. A value that already
// starts with our owner prefix means an earlier attempt of ours succeeded but its reply was lost;
// it is ours, not busy. pcall on GET turns a key of another type into a clean answer instead of
// a script error.
const Script k_acquire_script(R"lua(
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' then return {-1, redis.call('TYPE', KEYS[1])['ok']} end
if v then
  if string.sub(v, 1, #ARGV[3]) == ARGV[3] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {1, tonumber(string.match(v, ' fence=(%d+)$') or '0')}
  end
  return {0, v, redis.call('PTTL', KEYS[1])}
end
local fence = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. ' fence=' .. fence, 'PX', ARGV[2])
return {1, fence}
)lua");

// Compare-then-PEXPIRE in one step: between a client's GET and PEXPIRE our lock could expire and
// be taken by another holder, whose lock we would then extend.
const Script k_renew_script(R"lua(
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'string' and string.sub(v, 1, #ARGV[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
)lua");

// Compare-then-DEL in one step, for the same race: a plain DEL (or GET then DEL) can delete the
// lock of the holder who took over after ours expired.
const Script k_release_script(R"lua(
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'string' and string.sub(v, 1, #ARGV[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
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

}  // namespace

std::string helper_key(std::string_view key, std::string_view kind) {
  std::string suffix = ":rlock:" + std::string(kind);
  if (has_hash_tag(key) || key.find('}') != std::string_view::npos)
    return std::string(key) + suffix;
  return "{" + std::string(key) + "}" + suffix;
}

bool is_helper_key(std::string_view key) {
  for (std::string_view kind : {"fence"}) {
    std::string suffix = ":rlock:" + std::string(kind);
    if (key.size() > suffix.size() && key.substr(key.size() - suffix.size()) == suffix) return true;
  }
  return false;
}

Lock::Lock(Redis& redis, std::string key, std::string token)
    : redis_(redis), key_(std::move(key)), fence_key_(helper_key(key_, "fence")),
      token_(std::move(token)), prefix_(owner_prefix(token_)) {}

Result<AcquireOutcome> Lock::try_acquire(const std::string& value, Millis ttl, TimePoint deadline) {
  auto reply = eval(redis_, k_acquire_script, {key_, fence_key_},
                    {value, std::to_string(ttl.count()), prefix_}, deadline);
  if (!reply) return reply.failure();
  const auto& e = reply->elements;
  if (!reply->is_array() || e.size() < 2 || !e[0].is_integer())
    return unexpected_reply("the acquire script");
  switch (e[0].integer) {
  case 1:
    if (!e[1].is_integer()) break;
    return AcquireOutcome{Acquired{e[1].integer}};
  case 0:
    if (e.size() != 3 || !e[1].is_string() || !e[2].is_integer()) break;
    return AcquireOutcome{Busy{e[1].str, Millis(e[2].integer)}};
  case -1:
    return AcquireOutcome{WrongType{e[1].str}};
  }
  return unexpected_reply("the acquire script");
}

Result<bool> Lock::renew(Millis ttl, TimePoint deadline) {
  auto reply =
      eval(redis_, k_renew_script, {key_}, {prefix_, std::to_string(ttl.count())}, deadline);
  if (!reply) return reply.failure();
  if (!reply->is_integer()) return unexpected_reply("the renew script");
  return reply->integer == 1;
}

Result<bool> Lock::release(TimePoint deadline) {
  auto reply = eval(redis_, k_release_script, {key_}, {prefix_}, deadline);
  if (!reply) return reply.failure();
  if (!reply->is_integer()) return unexpected_reply("the release script");
  return reply->integer == 1;
}

}  // namespace rlock
