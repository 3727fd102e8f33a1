#include "lock/lock_state.h"

#include <fnmatch.h>

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "lock/lock.h"

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

namespace {

constexpr size_t k_not_asked = SIZE_MAX;

// Commands sent in one round trip. Each reply is found again by the index add() gave its
// command, which the caller keeps under a name (LockReads), never by counting positions.
class Pipeline {
public:
  size_t add(Argv argv) {
    commands_.push_back(std::move(argv));
    return commands_.size() - 1;
  }
  bool empty() const { return commands_.empty(); }
  Result<Unit> run(Redis& redis) {
    auto replies = redis.pipeline(commands_, Clock::now() + redis.command_timeout());
    if (!replies) return replies.failure();
    replies_ = std::move(*replies);
    return Unit{};
  }
  // The reply to the command added as AT; nullptr when it was not asked.
  const Reply* operator[](size_t at) const { return at == k_not_asked ? nullptr : &replies_[at]; }

private:
  std::vector<Argv> commands_;
  std::vector<Reply> replies_;
};

// What a Pipeline asks about one lock, each reply under its name; k_not_asked for what the
// caller needs not show.
struct LockReads {
  size_t type = k_not_asked;              // TYPE KEY
  size_t value = k_not_asked;             // GET KEY
  size_t pttl = k_not_asked;              // PTTL KEY
  size_t fence = k_not_asked;             // the fence counter (GET)
  size_t fence_pttl = k_not_asked;        // how long it is kept (PTTL)
  size_t history_pttl = k_not_asked;      // how long the history is kept (PTTL)
  size_t alive = k_not_asked;             // the waiters' places, by expiry
  size_t queue = k_not_asked;             // the waiters in arrival order
  size_t sharers = k_not_asked;           // the waiters that want to share (--shared)
  size_t semaphore = k_not_asked;         // the semaphore's places, by expiry
  size_t semaphore_values = k_not_asked;  // their values
  size_t shared = k_not_asked;            // a shared lock's places, by expiry
  size_t shared_values = k_not_asked;     // their values
  size_t history = k_not_asked;           // the newest runs (XREVRANGE)
  size_t pause = k_not_asked;             // a pause (rlock pause: GET)
  size_t pause_pttl = k_not_asked;        // its time left (PTTL)
};

void ask_value(Pipeline& p, LockReads& r, const std::string& key) {
  r.value = p.add({"GET", key});
  r.pttl = p.add({"PTTL", key});
}

void ask_places(Pipeline& p, LockReads& r, const std::string& key) {
  r.semaphore = p.add({"ZRANGE", helper_key(key, "sem"), "0", "-1", "WITHSCORES"});
  r.semaphore_values = p.add({"HGETALL", helper_key(key, "holders")});
  r.shared = p.add({"ZRANGE", helper_key(key, "shared"), "0", "-1", "WITHSCORES"});
  r.shared_values = p.add({"HGETALL", helper_key(key, "shared-values")});
}

void ask_waiters_and_history(Pipeline& p, LockReads& r, const std::string& key) {
  r.alive = p.add({"ZRANGE", helper_key(key, "alive"), "0", "-1", "WITHSCORES"});
  // The newest run that ran is among the last few: skipped runs and resets are passed over.
  r.history = p.add({"XREVRANGE", helper_key(key, "history"), "+", "-", "COUNT", "10"});
}

// Everything status, inspect and watch show of KEY. TYPE before GET: decode_lock() tells a key
// that changed between the two.
LockReads ask_everything(Pipeline& p, const std::string& key) {
  LockReads r;
  r.type = p.add({"TYPE", key});
  ask_value(p, r, key);
  r.fence = p.add({"GET", helper_key(key, "fence")});
  r.fence_pttl = p.add({"PTTL", helper_key(key, "fence")});
  r.history_pttl = p.add({"PTTL", helper_key(key, "history")});
  ask_places(p, r, key);
  ask_waiters_and_history(p, r, key);
  r.queue = p.add({"ZRANGE", helper_key(key, "queue"), "0", "-1", "WITHSCORES"});
  r.sharers = p.add({"ZRANGE", helper_key(key, "shared-waiters"), "0", "-1"});
  r.pause = p.add({"GET", helper_key(key, "pause")});
  r.pause_pttl = p.add({"PTTL", helper_key(key, "pause")});
  return r;
}

// The newest run that ran, in HISTORY (XREVRANGE) of the lock S: skipped ones (--record-skips)
// and resets say nothing of the job, nor does the start of the run that holds it now (S shows
// it); a start whose run no longer holds it is a run that died (settle_starts).
std::optional<RunRecord> last_run(const LockState& s, const Reply& history) {
  std::vector<int64_t> held = held_fences(s);
  for (const Reply& entry : history.elements) {
    auto run = decode_history_entry(entry);
    if (!run || run->end == run_end_name(RunEnd::busy) ||
        run->end == run_end_name(RunEnd::paused) ||
        run->end == run_end_name(RunEnd::done_this_period) ||
        run->end == run_end_name(RunEnd::period_reset))
      continue;
    std::vector<RunRecord> one{std::move(*run)};
    settle_starts(one, held);
    if (one[0].end != run_end_name(RunEnd::running)) return std::move(one[0]);
  }
  return std::nullopt;
}

// The state of KEY from what R asked in P, at the server's NOW_MS. TYPE is the key's type when
// R did not ask it (a look before did). A reply not asked leaves its part of the state empty.
Result<LockState> decode_lock(Redis& redis, const std::string& key, const std::string& type,
                              const Pipeline& p, const LockReads& r, int64_t now_ms) {
  LockState s;
  s.key = key;
  s.type = type;
  // The type decides; GET's WRONGTYPE for a non-string is expected and ignored.
  if (const Reply* t = p[r.type]) {
    if (t->type == Reply::Type::error) return redis.server_failure(t->str);
    s.type = t->str;
  }
  const Reply* value = p[r.value];
  if (value && value->is_string()) s.raw = value->str;
  if (const Reply* pttl = p[r.pttl]) {
    if (pttl->type == Reply::Type::error) return redis.server_failure(pttl->str);
    if (pttl->is_integer()) s.pttl = Millis(pttl->integer);
  }
  if (const Reply* pause = p[r.pause]; pause && pause->is_string()) {
    s.pause = pause->str;
    if (const Reply* left = p[r.pause_pttl]; left && left->is_integer())
      s.pause_pttl = Millis(left->integer);
  }
  if (const Reply* kept = p[r.fence_pttl]; kept && kept->is_integer())
    s.fence_counter_pttl = Millis(kept->integer);
  if (const Reply* kept = p[r.history_pttl]; kept && kept->is_integer())
    s.history_pttl = Millis(kept->integer);
  if (const Reply* fence = p[r.fence]; fence && fence->is_string()) {
    try {
      s.fence_counter = std::stoll(fence->str);
    } catch (const std::exception&) {
      // someone else's data under our helper's name: show nothing rather than fail
    }
  }
  // Waiters that still renew their place (the dead are pruned at the next acquire).
  std::map<std::string, double> place_until;
  if (const Reply* alive = p[r.alive]; alive && alive->is_array()) {
    for (size_t j = 0; j + 1 < alive->elements.size(); j += 2) {
      double until = std::stod(alive->elements[j + 1].str);
      place_until[alive->elements[j].str] = until;
      if (until > static_cast<double>(now_ms)) ++s.waiters;
    }
  }
  // The queue in arrival order (scores: server microseconds), each with its liveness, and
  // whether it wants to share (--shared).
  std::set<std::string> sharing;
  if (const Reply* sharers = p[r.sharers]; sharers && sharers->is_array())
    for (const Reply& token : sharers->elements) sharing.insert(token.str);
  if (const Reply* queue = p[r.queue]; queue && queue->is_array()) {
    for (size_t j = 0; j + 1 < queue->elements.size(); j += 2) {
      QueuedWaiter w;
      w.token = queue->elements[j].str;
      w.shares = sharing.count(w.token) > 0;
      auto arrived_ms = static_cast<int64_t>(std::stod(queue->elements[j + 1].str) / 1000);
      w.waiting = Millis(std::max<int64_t>(0, now_ms - arrived_ms));
      auto until = place_until.find(w.token);
      w.place = until == place_until.end() ? Millis(0)
                                           : Millis(static_cast<int64_t>(until->second) - now_ms);
      s.queue.push_back(std::move(w));
    }
  }
  if (const Reply* places = p[r.semaphore])
    s.semaphore = live_places(*places, *p[r.semaphore_values], now_ms);
  if (const Reply* places = p[r.shared])
    s.shared = live_places(*places, *p[r.shared_values], now_ms);
  // Changed between TYPE and GET: show it as it was typed, without a value.
  if (s.type == "string" && !(value && value->is_string())) s.type = "none";
  classify(s);
  s.now_ms = now_ms;
  if (const Reply* history = p[r.history]; history && history->is_array())
    s.last_run = last_run(s, *history);
  return s;
}

// The server's clock from the TIME reply AT of P.
Result<int64_t> server_now(Redis& redis, const Pipeline& p, size_t at) {
  const Reply& time = *p[at];
  if (time.type == Reply::Type::error) return redis.server_failure(time.str);
  auto now = server_time_ms(time);
  if (!now) return unexpected_reply("TIME");
  return *now;
}

}  // namespace

std::vector<int64_t> held_fences(const LockState& s) {
  std::vector<int64_t> held;
  if (s.value && s.value->fence) held.push_back(*s.value->fence);
  for (const auto* places : {&s.semaphore, &s.shared})
    for (const SemaphoreHolder& place : *places)
      if (place.value && place.value->fence) held.push_back(*place.value->fence);
  return held;
}

Result<std::vector<LockState>> read_locks(Redis& redis, const std::vector<std::string>& keys) {
  // Plain pipelined reads, not MULTI: a server out of memory refuses to queue commands inside
  // MULTI, and that is when an operator most needs to look.
  Pipeline p;
  size_t time = p.add({"TIME"});
  std::vector<LockReads> reads;
  reads.reserve(keys.size());
  for (const auto& key : keys) reads.push_back(ask_everything(p, key));
  if (auto done = p.run(redis); !done) return done.failure();
  auto now_ms = server_now(redis, p, time);
  if (!now_ms) return now_ms.failure();
  std::vector<LockState> out;
  for (size_t i = 0; i < keys.size(); ++i) {
    auto s = decode_lock(redis, keys[i], "", p, reads[i], *now_ms);
    if (!s) return s.failure();
    out.push_back(std::move(*s));
  }
  return out;
}

namespace {

// Locks looked at, or read, in one round trip: few enough that a batch's replies stay small
// (list's memory does not grow with the number of locks), enough that round trips are few.
constexpr size_t k_read_batch = 500;

// Of CANDIDATES (keys of SERVER whose fence counters SCAN found), those a look finds taken,
// added to OUT: a key that is there (its type tells what to read of it), or, for a key that is
// not its own hash tag's alias, the places of a semaphore or a shared lock. One TYPE per
// candidate (most fence counters belong to locks that are free now), then one EXISTS for the
// places of those without a key (a semaphore's and a shared lock's are in one Cluster slot).
Result<Unit> look_at(Redis& redis, uint32_t server,
                     const std::vector<std::pair<std::string, bool>>& candidates,
                     std::vector<FoundLock>& out) {
  Pipeline types;
  std::vector<size_t> type;
  for (const auto& [key, alias] : candidates) type.push_back(types.add({"TYPE", key}));
  if (auto done = types.run(redis); !done) return done.failure();
  Pipeline places;
  std::vector<std::pair<size_t, size_t>> exists;  // candidate, its EXISTS
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Reply& t = *types[type[i]];
    const auto& [key, alias] = candidates[i];
    // An error reply (an ASK in a Cluster's resharding: the key has moved on) counts as no
    // key here: a look does not fail the listing.
    if (t.type == Reply::Type::error) continue;
    if (t.str == "string")
      out.push_back({key, server, FoundLock::Seen::value, false});
    else if (t.str != "none")
      out.push_back({key, server, FoundLock::Seen::other, false});
    else if (!alias)
      exists.emplace_back(
          i, places.add({"EXISTS", helper_key(key, "sem"), helper_key(key, "shared")}));
  }
  if (places.empty()) return Unit{};
  if (auto done = places.run(redis); !done) return done.failure();
  for (const auto& [i, at] : exists)
    if (places[at]->integer > 0)
      out.push_back({candidates[i].first, server, FoundLock::Seen::places, false});
  return Unit{};
}

// rlock's locks on one server: every lock rlock took has a fence counter (kept --retention
// after its last use), so SCAN for those, letting the server match the names, and look only
// at the locks they name. Nothing is read of unrelated keys, whatever their number or size.
Result<Unit> find_rlock_locks(Redis& redis, uint32_t server, const std::string& pattern,
                              std::vector<FoundLock>& out) {
  // A counter "{K}:rlock:fence" is K's, or the lock "{K}"'s (a key that is its own hash tag):
  // the second only when that key is there, since the two would share a semaphore's keys.
  const std::string glob = fnmatch_pattern(pattern);
  std::string cursor = "0";
  do {
    auto page =
        scan_page(redis, cursor, "*:rlock:fence", "string", Clock::now() + redis.command_timeout());
    if (!page) return page.failure();
    std::vector<std::pair<std::string, bool>> candidates;  // key, whether an alias
    for (const std::string& fence : *page) {
      std::vector<std::string> owners = helper_owners(fence, "fence");
      for (size_t i = 0; i < owners.size(); ++i)
        if (::fnmatch(glob.c_str(), owners[i].c_str(), 0) == 0)
          candidates.emplace_back(std::move(owners[i]), i > 0);
    }
    for (size_t from = 0; from < candidates.size(); from += k_read_batch) {
      std::vector<std::pair<std::string, bool>> batch(
          candidates.begin() + from,
          candidates.begin() + std::min(candidates.size(), from + k_read_batch));
      if (auto looked = look_at(redis, server, batch, out); !looked) return looked.failure();
    }
  } while (cursor != "0");
  return Unit{};
}

// Other software's locks: plain strings with an expiry whose names match PATTERN. Looked for
// only when the operator named a pattern (or a prefix): without one, every string of the
// server would match, and listing would download every value.
Result<Unit> find_foreign_locks(Redis& redis, uint32_t server, const std::string& pattern,
                                std::vector<FoundLock>& out) {
  std::string cursor = "0";
  do {
    TimePoint deadline = Clock::now() + redis.command_timeout();
    // TYPE string: the server leaves out hashes, sets ... of which no lock is made.
    auto page = scan_page(redis, cursor, pattern, "string", deadline);
    if (!page) return page.failure();
    Pipeline ttls;
    std::vector<std::pair<const std::string*, size_t>> keys;  // key, its PTTL
    for (const std::string& k : *page)
      if (!is_helper_key(k)) keys.emplace_back(&k, ttls.add({"PTTL", k}));
    if (keys.empty()) continue;
    if (auto done = ttls.run(redis); !done) return done.failure();
    // A plain string is someone's lock only if it expires; without a TTL it is just data.
    for (const auto& [key, at] : keys)
      if (ttls[at]->is_integer() && ttls[at]->integer >= 0)
        out.push_back({*key, server, FoundLock::Seen::value, true});
  } while (cursor != "0");
  return Unit{};
}

// The locks on one server (one primary of a Cluster, one node of Redlock).
Result<Unit> find_on_server(Redis& redis, uint32_t server, const std::string& pattern,
                            std::vector<FoundLock>& out) {
  if (auto found = find_rlock_locks(redis, server, pattern, out); !found) return found;
  if (pattern != "*") {
    // A lock of rlock's that matches is found both ways: find_locks keeps the first.
    if (auto found = find_foreign_locks(redis, server, pattern, out); !found) return found;
  }
  return Unit{};
}

// What to read of F, by what its look saw: another program's lock is its value alone; a key
// of another type is read as status reads it, type first.
LockReads ask_found(Pipeline& p, const FoundLock& f) {
  LockReads r;
  if (f.seen == FoundLock::Seen::other) r.type = p.add({"TYPE", f.key});
  if (f.seen != FoundLock::Seen::places) ask_value(p, r, f.key);
  if (f.foreign) return r;
  if (f.seen == FoundLock::Seen::places) ask_places(p, r, f.key);
  ask_waiters_and_history(p, r, f.key);
  return r;
}

// The key's type as F's look saw it, when the read does not ask again.
const char* seen_type(const FoundLock& f) {
  switch (f.seen) {
  case FoundLock::Seen::value: return "string";
  case FoundLock::Seen::places: return "none";
  case FoundLock::Seen::other: return "";  // asked again
  }
  return "";
}

}  // namespace

Result<FoundLocks> find_locks(Redis& redis, const std::string& pattern) {
  FoundLocks found;
  auto scanned = redis.for_each_primary(
      [&](Redis& server) -> Result<Unit> {
        std::vector<FoundLock> here;
        auto index = static_cast<uint32_t>(found.servers.size());
        if (auto done = find_on_server(server, index, pattern, here); !done) return done;
        found.servers.push_back(&server);
        found.locks.insert(found.locks.end(), std::make_move_iterator(here.begin()),
                           std::make_move_iterator(here.end()));
        return Unit{};
      },
      Clock::now() + redis.command_timeout());
  if (!scanned) return scanned.failure();
  // Redlock's nodes each hold a copy of a lock: show it once, the first node's.
  std::stable_sort(found.locks.begin(), found.locks.end(),
                   [](const FoundLock& a, const FoundLock& b) { return a.key < b.key; });
  found.locks.erase(
      std::unique(found.locks.begin(), found.locks.end(),
                  [](const FoundLock& a, const FoundLock& b) { return a.key == b.key; }),
      found.locks.end());
  return found;
}

namespace {

// The locks of FOUND from FROM to TO, read: one pipelined round trip per server that holds some.
Result<std::vector<LockState>> read_batch(const FoundLocks& found, size_t from, size_t to) {
  std::vector<std::optional<LockState>> states(to - from);
  // A batch's locks may be on several servers (a Cluster's primaries): one round trip each.
  for (uint32_t server = 0; server < found.servers.size(); ++server) {
    Redis& redis = *found.servers[server];
    Pipeline p;
    size_t time = k_not_asked;
    std::vector<std::pair<size_t, LockReads>> reads;  // lock, what is asked of it
    for (size_t i = from; i < to; ++i) {
      if (found.locks[i].server != server) continue;
      if (time == k_not_asked) time = p.add({"TIME"});
      reads.emplace_back(i, ask_found(p, found.locks[i]));
    }
    if (p.empty()) continue;
    if (auto done = p.run(redis); !done) return done.failure();
    auto now_ms = server_now(redis, p, time);
    if (!now_ms) return now_ms.failure();
    for (const auto& [i, r] : reads) {
      const FoundLock& f = found.locks[i];
      auto s = decode_lock(redis, f.key, seen_type(f), p, r, *now_ms);
      if (!s) return s.failure();
      // Free since the look (or another program's lock that lost its expiry): not listed.
      if (s->kind == LockState::Kind::free) continue;
      if (f.foreign && s->kind == LockState::Kind::foreign && s->pttl.count() < 0) continue;
      states[i - from] = std::move(*s);
    }
  }
  std::vector<LockState> batch;
  batch.reserve(states.size());
  for (auto& s : states)
    if (s) batch.push_back(std::move(*s));
  return batch;
}

// Reads the batches of FOUND in order on a thread of its own, one batch ahead of the caller of
// next(), so that the server answers for the next batch while rlock prints this one instead of
// each waiting for the other: a quarter off list's time (docs/PERFORMANCE.md, "list at
// scale"). While it runs, only this thread talks to the servers.
class ReadAhead {
public:
  explicit ReadAhead(const FoundLocks& found) : found_(found), thread_([this] { run(); }) {}
  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;
  // Also on the way out of the caller's exception (stdout gone): the reader stops once the
  // round trip it is in is over.
  ~ReadAhead() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }

  // The next batch, in order; nullopt after the last, and after one that failed. Throws what
  // the reader threw.
  std::optional<Result<std::vector<LockState>>> next() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return ready_ || finished_; });
    if (!ready_) {
      if (error_) std::rethrow_exception(error_);
      return std::nullopt;
    }
    std::optional<Result<std::vector<LockState>>> batch = std::move(ready_);
    ready_.reset();
    changed_.notify_all();
    return batch;
  }

private:
  void run() {
    try {
      for (size_t from = 0; from < found_.locks.size(); from += k_read_batch) {
        auto batch = read_batch(found_, from, std::min(found_.locks.size(), from + k_read_batch));
        bool failed = !batch;
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return !ready_ || stop_; });
        if (stop_) break;
        ready_ = std::move(batch);
        changed_.notify_all();
        if (failed) break;
      }
    } catch (...) {
      std::lock_guard lock(mutex_);
      error_ = std::current_exception();
    }
    std::lock_guard lock(mutex_);
    finished_ = true;
    changed_.notify_all();
  }

  const FoundLocks& found_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::optional<Result<std::vector<LockState>>> ready_;  // read, not yet taken by next()
  std::exception_ptr error_;                             // what the reader threw
  bool stop_ = false;                                    // the caller has gone
  bool finished_ = false;                                // the reader has
  std::thread thread_;  // last: it starts once the members above are made
};

}  // namespace

Result<Unit> read_found_locks(const FoundLocks& found,
                              const std::function<void(const std::vector<LockState>&)>& each) {
  ReadAhead batches(found);
  while (auto batch = batches.next()) {
    if (!*batch) return batch->failure();
    each(**batch);
  }
  return Unit{};
}

}  // namespace rlock
