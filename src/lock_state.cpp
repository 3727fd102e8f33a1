#include "lock_state.h"

#include <fnmatch.h>

#include <algorithm>
#include <map>
#include <set>

#include "lock.h"

namespace rlock {

namespace {

// Keys asked for per SCAN step. Large enough that a million unrelated keys take a few hundred
// round trips, small enough that no step blocks the server noticeably.
constexpr int k_scan_count = 1000;

// Fills KIND, VALUE from TYPE and the raw value.
void classify(LockState& s) {
  if (s.type == "none") {
    s.kind = !s.semaphore.empty() ? LockState::Kind::semaphore
             : !s.shared.empty()  ? LockState::Kind::shared
                                  : LockState::Kind::free;
  } else if (s.type != "string") {
    s.kind = LockState::Kind::not_a_lock;
  } else {
    s.value = decode_lock_value(s.raw);
    s.kind = !s.value          ? LockState::Kind::foreign
             : s.value->broken ? LockState::Kind::broken
                               : LockState::Kind::held;
  }
}

// The lock keys whose KIND helper key HELPER may be: "{K}:rlock:fence" is K's, or the key
// "{K}"'s when K has no braces (helper_key names both alike); "K:rlock:fence" with K tagged
// is K's. Checked against helper_key, so the two never disagree.
std::vector<std::string> helper_owners(const std::string& helper, const std::string& kind) {
  std::string suffix = ":rlock:" + kind;
  if (helper.size() <= suffix.size() || !helper.ends_with(suffix)) return {};
  std::string key = helper.substr(0, helper.size() - suffix.size());
  std::vector<std::string> out;
  if (key.size() >= 2 && key.front() == '{' && key.back() == '}') {
    std::string inner = key.substr(1, key.size() - 2);
    if (helper_key(inner, kind) == helper) out.push_back(inner);
  }
  if (helper_key(key, kind) == helper) out.push_back(key);
  return out;
}

// PATTERN, a Redis glob, as fnmatch(3) reads it: Redis takes "[!a]" for the set of '!' and
// 'a' (it negates with "[^a]", as fnmatch also does), so the '!' is escaped.
std::string fnmatch_pattern(const std::string& pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    out += pattern[i];
    if (pattern[i] == '\\' && i + 1 < pattern.size()) {
      out += pattern[++i];
    } else if (pattern[i] == '[' && i + 1 < pattern.size() && pattern[i + 1] == '!') {
      out += "\\!";
      ++i;
    }
  }
  return out;
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

// The places of a semaphore or a shared lock that have not expired, from a ZRANGE WITHSCORES of
// their expiries and an HGETALL of their values.
std::vector<SemaphoreHolder> live_places(const Reply& expiries, const Reply& all_values,
                                         int64_t now_ms) {
  std::map<std::string, std::string> values;
  for (size_t j = 0; all_values.is_array() && j + 1 < all_values.elements.size(); j += 2)
    values[all_values.elements[j].str] = all_values.elements[j + 1].str;
  std::vector<SemaphoreHolder> out;
  for (size_t j = 0; expiries.is_array() && j + 1 < expiries.elements.size(); j += 2) {
    auto expiry = static_cast<int64_t>(std::stod(expiries.elements[j + 1].str));
    if (expiry <= now_ms) continue;
    SemaphoreHolder h;
    h.token = expiries.elements[j].str;
    h.raw = values[h.token];
    h.value = decode_lock_value(h.raw);
    h.ttl = Millis(expiry - now_ms);
    out.push_back(std::move(h));
  }
  return out;
}

}  // namespace

Result<std::vector<LockState>> read_locks(Redis& redis, const std::vector<std::string>& keys) {
  // Plain pipelined reads, not MULTI: a server out of memory refuses to queue commands inside
  // MULTI, and that is when an operator most needs to look.
  constexpr size_t k_per_key = 14;
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
    commands.push_back({"PTTL", helper_key(key, "fence")});
    commands.push_back({"PTTL", helper_key(key, "history")});
    commands.push_back({"ZRANGE", helper_key(key, "shared"), "0", "-1", "WITHSCORES"});
    commands.push_back({"HGETALL", helper_key(key, "shared-values")});
    commands.push_back({"ZRANGE", helper_key(key, "shared-waiters"), "0", "-1"});
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
    if (e[9].is_integer()) s.fence_counter_pttl = Millis(e[9].integer);
    if (e[10].is_integer()) s.history_pttl = Millis(e[10].integer);
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
    // The queue in arrival order (scores: server microseconds), each with its liveness, and
    // whether it wants to share (--shared).
    std::set<std::string> sharing;
    for (size_t j = 0; e[13].is_array() && j < e[13].elements.size(); ++j)
      sharing.insert(e[13].elements[j].str);
    for (size_t j = 0; e[8].is_array() && j + 1 < e[8].elements.size(); j += 2) {
      QueuedWaiter w;
      w.token = e[8].elements[j].str;
      w.shares = sharing.count(w.token) > 0;
      auto arrived_ms = static_cast<int64_t>(std::stod(e[8].elements[j + 1].str) / 1000);
      w.waiting = Millis(std::max<int64_t>(0, now_ms - arrived_ms));
      auto until = place_until.find(w.token);
      w.place = until == place_until.end() ? Millis(0)
                                           : Millis(static_cast<int64_t>(until->second) - now_ms);
      s.queue.push_back(std::move(w));
    }
    s.semaphore = live_places(e[5], e[6], now_ms);
    s.shared = live_places(e[11], e[12], now_ms);
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

// Keys of one batch of reads, small enough for one round trip of bounded size.
constexpr size_t k_read_batch = 200;

// rlock's locks on one server: every lock rlock took has a fence counter (kept --retention
// after its last use), so SCAN for those, letting the server match the names, and read only
// the locks they name. Nothing is read of unrelated keys, whatever their number or size.
Result<std::vector<LockState>> scan_rlock_locks(Redis& redis, const std::string& pattern) {
  // A counter "{K}:rlock:fence" is K's, or the lock "{K}"'s (a key that is its own hash tag):
  // the second only when that key is there, since the two would share a semaphore's keys.
  struct Candidate {
    std::string key;
    bool alias;
  };
  std::vector<Candidate> candidates;
  const std::string glob = fnmatch_pattern(pattern);
  std::string cursor = "0";
  do {
    auto page =
        scan_page(redis, cursor, "*:rlock:fence", "string", Clock::now() + redis.command_timeout());
    if (!page) return page.failure();
    for (const std::string& fence : *page) {
      std::vector<std::string> owners = helper_owners(fence, "fence");
      for (size_t i = 0; i < owners.size(); ++i)
        if (::fnmatch(glob.c_str(), owners[i].c_str(), 0) == 0)
          candidates.push_back({std::move(owners[i]), i > 0});
    }
  } while (cursor != "0");
  std::vector<LockState> out;
  for (size_t from = 0; from < candidates.size(); from += k_read_batch) {
    // Two cheap looks first: most fence counters belong to locks that are free now. The places
    // of a semaphore and of a shared lock are in one slot (Cluster), so one EXISTS for both.
    size_t to = std::min(candidates.size(), from + k_read_batch);
    std::vector<Argv> looks;
    for (size_t i = from; i < to; ++i) {
      looks.push_back({"EXISTS", candidates[i].key});
      looks.push_back({"EXISTS", helper_key(candidates[i].key, "sem"),
                       helper_key(candidates[i].key, "shared")});
    }
    auto seen = redis.pipeline(looks, Clock::now() + redis.command_timeout());
    if (!seen) return seen.failure();
    std::vector<std::string> taken;
    for (size_t i = from; i < to; ++i) {
      bool held = (*seen)[2 * (i - from)].integer > 0;
      bool places = !candidates[i].alias && (*seen)[2 * (i - from) + 1].integer > 0;
      if (held || places) taken.push_back(candidates[i].key);
    }
    if (taken.empty()) continue;
    auto locks = read_locks(redis, taken);
    if (!locks) return locks.failure();
    for (auto& s : *locks)
      if (s.kind != LockState::Kind::free) out.push_back(std::move(s));
  }
  return out;
}

// Other software's locks: plain strings with an expiry whose names match PATTERN. Read only
// when the operator named a pattern (or a prefix): without one, every string of the server
// would match, and listing would download every value.
Result<std::vector<LockState>> scan_foreign_locks(Redis& redis, const std::string& pattern) {
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
    std::vector<Argv> ttls;
    for (const auto& key : keys) ttls.push_back({"PTTL", key});
    auto expiring = redis.pipeline(ttls, deadline);
    if (!expiring) return expiring.failure();
    // A plain string is someone's lock only if it expires; without a TTL it is just data.
    std::vector<std::string> locks;
    for (size_t i = 0; i < keys.size(); ++i)
      if ((*expiring)[i].is_integer() && (*expiring)[i].integer >= 0) locks.push_back(keys[i]);
    if (locks.empty()) continue;
    std::vector<Argv> commands;
    for (const auto& key : locks) {
      commands.push_back({"GET", key});
      commands.push_back({"PTTL", key});
    }
    auto replies = redis.pipeline(commands, deadline);
    if (!replies) return replies.failure();
    for (size_t i = 0; i < locks.size(); ++i) {
      const Reply& value = (*replies)[2 * i];
      const Reply& pttl = (*replies)[2 * i + 1];
      if (!value.is_string()) continue;  // gone (or changed type) since the SCAN
      LockState s;
      s.key = locks[i];
      s.type = "string";
      s.raw = value.str;
      s.pttl = Millis(pttl.is_integer() ? pttl.integer : -2);
      classify(s);
      if (s.kind == LockState::Kind::foreign && s.pttl.count() < 0) continue;
      out.push_back(std::move(s));
    }
  } while (cursor != "0");
  return out;
}

// The locks on one server (one primary of a Cluster, one node of Redlock).
Result<std::vector<LockState>> scan_server(Redis& redis, const std::string& pattern) {
  auto out = scan_rlock_locks(redis, pattern);
  if (!out) return out;
  if (pattern != "*") {
    auto foreign = scan_foreign_locks(redis, pattern);
    if (!foreign) return foreign.failure();
    // A lock of rlock's that matches is found both ways: scan_locks keeps one.
    out->insert(out->end(), foreign->begin(), foreign->end());
  }
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
