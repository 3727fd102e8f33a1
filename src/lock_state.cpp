#include "lock_state.h"

#include <fnmatch.h>

#include <algorithm>
#include <map>

#include "lock.h"

namespace rlock {

namespace {

// Keys asked for per SCAN step. Large enough that a million unrelated keys take a few hundred
// round trips, small enough that no step blocks the server noticeably.
constexpr int k_scan_count = 1000;

// Fills KIND, VALUE from TYPE and the raw value.
void classify(LockState& s) {
  if (s.type == "none") {
    s.kind = s.semaphore.empty() ? LockState::Kind::free : LockState::Kind::semaphore;
  } else if (s.type != "string") {
    s.kind = LockState::Kind::not_a_lock;
  } else {
    s.value = decode_lock_value(s.raw);
    s.kind = s.value ? LockState::Kind::held : LockState::Kind::foreign;
  }
}

// The lock key a semaphore's helper key belongs to: "{K}:rlock:sem" or "K:rlock:sem".
std::string semaphore_owner(const std::string& sem_key) {
  static const std::string k_suffix = ":rlock:sem";
  std::string key = sem_key.substr(0, sem_key.size() - k_suffix.size());
  if (key.size() >= 2 && key.front() == '{' && key.back() == '}')
    key = key.substr(1, key.size() - 2);
  return key;
}

// One SCAN step over the keys of TYPE that match PATTERN, from CURSOR, which moves on ("0" once
// the whole keyspace was seen). Never KEYS: SCAN keeps the server responsive on any size.
Result<std::vector<std::string>> scan_page(Redis& redis, std::string& cursor,
                                           const std::string& pattern, const char* type,
                                           TimePoint deadline) {
  auto page = redis.call(
      {"SCAN", cursor, "MATCH", pattern, "COUNT", std::to_string(k_scan_count), "TYPE", type},
      deadline);
  if (!page) {
    // The TYPE option came with Redis 6.0; older servers call it a syntax error.
    if (page.failure().kind == Failure::Kind::server &&
        page.failure().message.find("syntax error") != std::string::npos)
      return Failure{Failure::Kind::server,
                     redis.name() + ": this server's SCAN has no TYPE option; listing locks "
                                    "needs Redis 6.0 or later",
                     page.failure().code};
    return page.failure();
  }
  if (!page->is_array() || page->elements.size() != 2 || !page->elements[1].is_array())
    return unexpected_reply("SCAN");
  cursor = page->elements[0].str;
  std::vector<std::string> keys;
  for (const Reply& k : page->elements[1].elements) keys.push_back(k.str);
  return keys;
}

// Semaphores (--limit) live in helper zsets, not under their own key: find those, then keep
// the ones whose lock key matches PATTERN.
Result<std::vector<LockState>> scan_semaphores(Redis& redis, const std::string& pattern) {
  std::vector<std::string> keys;
  std::string cursor = "0";
  do {
    auto page =
        scan_page(redis, cursor, "*:rlock:sem", "zset", Clock::now() + redis.command_timeout());
    if (!page) return page.failure();
    for (const std::string& sem : *page) {
      std::string key = semaphore_owner(sem);
      if (::fnmatch(pattern.c_str(), key.c_str(), 0) == 0) keys.push_back(key);
    }
  } while (cursor != "0");
  if (keys.empty()) return std::vector<LockState>{};
  auto locks = read_locks(redis, keys);
  if (!locks) return locks.failure();
  std::vector<LockState> out;
  for (auto& s : *locks)
    if (s.kind == LockState::Kind::semaphore) out.push_back(std::move(s));
  return out;
}

}  // namespace

Result<std::vector<LockState>> read_locks(Redis& redis, const std::vector<std::string>& keys) {
  // Plain pipelined reads, not MULTI: a server out of memory refuses to queue commands inside
  // MULTI, and that is when an operator most needs to look.
  constexpr size_t k_per_key = 9;
  std::vector<Argv> commands = {{"TIME"}};
  for (const auto& key : keys) {
    commands.push_back({"TYPE", key});
    commands.push_back({"GET", key});
    commands.push_back({"PTTL", key});
    commands.push_back({"GET", helper_key(key, "fence")});
    commands.push_back({"ZRANGE", helper_key(key, "alive"), "0", "-1", "WITHSCORES"});
    commands.push_back({"ZRANGE", helper_key(key, "sem"), "0", "-1", "WITHSCORES"});
    commands.push_back({"HGETALL", helper_key(key, "holders")});
    commands.push_back({"XREVRANGE", helper_key(key, "history"), "+", "-", "COUNT", "10"});
    commands.push_back({"ZRANGE", helper_key(key, "queue"), "0", "-1", "WITHSCORES"});
  }
  auto replies = redis.pipeline(commands, Clock::now() + redis.command_timeout());
  if (!replies) return replies.failure();
  const Reply& time = replies->front();
  if (time.type == Reply::Type::error) return redis.server_failure(time.str);
  auto server_now = server_time_ms(time);
  if (!server_now) return unexpected_reply("TIME");
  int64_t now_ms = *server_now;
  std::vector<LockState> out;
  for (size_t i = 0; i < keys.size(); ++i) {
    const Reply* e = &(*replies)[1 + i * k_per_key];
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
    // Waiters that still renew their place (the dead are pruned at the next acquire).
    std::map<std::string, double> place_until;
    for (size_t j = 0; e[4].is_array() && j + 1 < e[4].elements.size(); j += 2) {
      double until = std::stod(e[4].elements[j + 1].str);
      place_until[e[4].elements[j].str] = until;
      if (until > static_cast<double>(now_ms)) ++s.waiters;
    }
    // The queue in arrival order (scores: server microseconds), each with its liveness.
    for (size_t j = 0; e[8].is_array() && j + 1 < e[8].elements.size(); j += 2) {
      QueuedWaiter w;
      w.token = e[8].elements[j].str;
      auto arrived_ms = static_cast<int64_t>(std::stod(e[8].elements[j + 1].str) / 1000);
      w.waiting = Millis(std::max<int64_t>(0, now_ms - arrived_ms));
      auto until = place_until.find(w.token);
      w.place = until == place_until.end() ? Millis(0)
                                           : Millis(static_cast<int64_t>(until->second) - now_ms);
      s.queue.push_back(std::move(w));
    }
    std::map<std::string, std::string> values;
    for (size_t j = 0; e[6].is_array() && j + 1 < e[6].elements.size(); j += 2)
      values[e[6].elements[j].str] = e[6].elements[j + 1].str;
    for (size_t j = 0; e[5].is_array() && j + 1 < e[5].elements.size(); j += 2) {
      auto expiry = static_cast<int64_t>(std::stod(e[5].elements[j + 1].str));
      if (expiry <= now_ms) continue;
      SemaphoreHolder h;
      h.token = e[5].elements[j].str;
      h.raw = values[h.token];
      h.value = decode_lock_value(h.raw);
      h.ttl = Millis(expiry - now_ms);
      s.semaphore.push_back(std::move(h));
    }
    // The newest run that ran: skipped ones (--record-skips) and resets say nothing of the job.
    for (size_t j = 0; e[7].is_array() && j < e[7].elements.size() && !s.last_run; ++j) {
      auto run = decode_history_entry(e[7].elements[j]);
      if (run && run->end != run_end_name(RunEnd::busy) &&
          run->end != run_end_name(RunEnd::done_this_period) &&
          run->end != run_end_name(RunEnd::period_reset))
        s.last_run = run;
    }
    // Changed between TYPE and GET: show it as it was typed, without a value.
    if (s.type == "string" && !e[1].is_string()) s.type = "none";
    classify(s);
    out.push_back(std::move(s));
  }
  return out;
}

namespace {

// The locks on one server (one master of a Cluster, one node of Redlock).
Result<std::vector<LockState>> scan_server(Redis& redis, const std::string& pattern) {
  std::vector<LockState> out;
  std::string cursor = "0";
  do {
    TimePoint deadline = Clock::now() + redis.command_timeout();
    // TYPE string: the server leaves out hashes, sets ... of which no lock is made.
    auto page = scan_page(redis, cursor, pattern, "string", deadline);
    if (!page) return page.failure();
    std::vector<std::string> keys;
    for (const std::string& k : *page)
      if (!is_helper_key(k)) keys.push_back(k);
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
  auto semaphores = scan_semaphores(redis, pattern);
  if (!semaphores) return semaphores.failure();
  out.insert(out.end(), semaphores->begin(), semaphores->end());
  return out;
}

}  // namespace

Result<std::vector<LockState>> scan_locks(Redis& redis, const std::string& pattern) {
  std::vector<LockState> out;
  auto scanned = redis.for_each_primary(
      [&](Redis& server) -> Result<Unit> {
        auto found = scan_server(server, pattern);
        if (!found) return found.failure();
        out.insert(out.end(), found->begin(), found->end());
        return Unit{};
      },
      Clock::now() + redis.command_timeout());
  if (!scanned) return scanned.failure();
  // Redlock's nodes each hold a copy of a lock: show it once.
  std::stable_sort(out.begin(), out.end(),
                   [](const LockState& a, const LockState& b) { return a.key < b.key; });
  out.erase(std::unique(out.begin(), out.end(),
                        [](const LockState& a, const LockState& b) { return a.key == b.key; }),
            out.end());
  return out;
}

}  // namespace rlock
