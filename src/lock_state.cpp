#include "lock_state.h"

#include <algorithm>

#include "lock.h"

namespace rlock {

namespace {

// Keys asked for per SCAN step. Large enough that a million unrelated keys take a few hundred
// round trips, small enough that no step blocks the server noticeably.
constexpr int k_scan_count = 1000;

// Reading and deleting are one step, so the value reported is exactly the one deleted.
const Script k_break_script(R"lua(
local t = redis.call('TYPE', KEYS[1])['ok']
if t ~= 'string' then return {t} end
local v = redis.call('GET', KEYS[1])
local pttl = redis.call('PTTL', KEYS[1])
redis.call('DEL', KEYS[1])
return {t, v, pttl}
)lua");

Failure unexpected(const std::string& what) {
  return Failure{Failure::Kind::protocol, "unexpected reply to " + what};
}

// Fills KIND, VALUE from TYPE and the raw value.
void classify(LockState& s) {
  if (s.type == "none") {
    s.kind = LockState::Kind::free;
  } else if (s.type != "string") {
    s.kind = LockState::Kind::not_a_lock;
  } else {
    s.value = decode_lock_value(s.raw);
    s.kind = s.value ? LockState::Kind::held : LockState::Kind::foreign;
  }
}

}  // namespace

Result<std::vector<LockState>> read_locks(Redis& redis, const std::vector<std::string>& keys) {
  // Plain pipelined reads, not MULTI: a server out of memory refuses to queue commands inside
  // MULTI, and that is when an operator most needs to look.
  constexpr size_t k_per_key = 4;
  std::vector<Argv> commands;
  for (const auto& key : keys) {
    commands.push_back({"TYPE", key});
    commands.push_back({"GET", key});
    commands.push_back({"PTTL", key});
    commands.push_back({"GET", helper_key(key, "fence")});
  }
  auto replies = redis.pipeline(commands, Clock::now() + redis.command_timeout());
  if (!replies) return replies.failure();
  std::vector<LockState> out;
  for (size_t i = 0; i < keys.size(); ++i) {
    const Reply* e = &(*replies)[i * k_per_key];
    // The type decides; GET's WRONGTYPE for a non-string is expected and ignored.
    if (e[0].type == Reply::Type::error) return redis.server_failure(e[0].str);
    if (e[2].type == Reply::Type::error) return redis.server_failure(e[2].str);
    LockState s;
    s.key = keys[i];
    s.type = e[0].str;
    if (e[1].is_string()) s.raw = e[1].str;
    if (e[2].is_integer()) s.pttl = Millis(e[2].integer);
    if (e[3].is_string()) {
      try {
        s.fence_counter = std::stoll(e[3].str);
      } catch (const std::exception&) {
        // someone else's data under our helper's name: show nothing rather than fail
      }
    }
    // Changed between TYPE and GET: show it as it was typed, without a value.
    if (s.type == "string" && !e[1].is_string()) s.type = "none";
    classify(s);
    out.push_back(std::move(s));
  }
  return out;
}

Result<std::vector<LockState>> scan_locks(Redis& redis, const std::string& pattern) {
  std::vector<LockState> out;
  std::string cursor = "0";
  do {
    TimePoint deadline = Clock::now() + redis.command_timeout();
    // TYPE string: the server leaves out hashes, sets ... of which no lock is made.
    auto page = redis.call(
        {"SCAN", cursor, "MATCH", pattern, "COUNT", std::to_string(k_scan_count), "TYPE", "string"},
        deadline);
    if (!page) return page.failure();
    if (!page->is_array() || page->elements.size() != 2 || !page->elements[1].is_array())
      return unexpected("SCAN");
    cursor = page->elements[0].str;
    std::vector<std::string> keys;
    for (const Reply& k : page->elements[1].elements)
      if (!is_helper_key(k.str)) keys.push_back(k.str);
    if (keys.empty()) continue;
    std::vector<Argv> commands;
    for (const auto& key : keys) {
      commands.push_back({"GET", key});
      commands.push_back({"PTTL", key});
    }
    auto replies = redis.pipeline(commands, deadline);
    if (!replies) return replies.failure();
    for (size_t i = 0; i < keys.size(); ++i) {
      const Reply& value = (*replies)[2 * i];
      const Reply& pttl = (*replies)[2 * i + 1];
      if (!value.is_string()) continue;  // gone (or changed type) since the SCAN
      LockState s;
      s.key = keys[i];
      s.type = "string";
      s.raw = value.str;
      s.pttl = Millis(pttl.is_integer() ? pttl.integer : -2);
      classify(s);
      // A plain string is someone's lock only if it expires; without a TTL it is just data.
      if (s.kind == LockState::Kind::foreign && s.pttl.count() < 0) continue;
      out.push_back(std::move(s));
    }
  } while (cursor != "0");
  std::sort(out.begin(), out.end(),
            [](const LockState& a, const LockState& b) { return a.key < b.key; });
  return out;
}

Result<LockState> break_lock(Redis& redis, const std::string& key) {
  auto reply = eval(redis, k_break_script, {key}, {}, Clock::now() + redis.command_timeout());
  if (!reply) return reply.failure();
  const auto& e = reply->elements;
  if (!reply->is_array() || e.empty()) return unexpected("the break script");
  LockState s;
  s.key = key;
  s.type = e[0].str;
  if (e.size() == 3) {
    s.raw = e[1].str;
    s.pttl = Millis(e[2].integer);
  }
  classify(s);
  return s;
}

}  // namespace rlock
