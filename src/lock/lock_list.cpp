// rlock list: every lock under a pattern, found by the fence counters SCAN finds (and, with a
// pattern, other programs' expiring strings), read in batches as they are printed
// (lock_state.h, docs/DESIGN.md "What rlock keeps, and for how long").
#include <fnmatch.h>

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "lock/lock.h"
#include "lock/lock_reads.h"
#include "lock/lock_state.h"

namespace rlock {

namespace {

// Keys asked for per SCAN step. Large enough that a million unrelated keys take a few hundred
// round trips, small enough that no step blocks the server noticeably.
constexpr int k_scan_count = 1000;

// The lock key whose KIND helper key HELPER is, if any: the one key that helper_key names it
// for (it never names two keys' helpers alike). Checked against helper_key, so the two never
// disagree.
std::optional<std::string> helper_owner(const std::string& helper, const std::string& kind) {
  for (std::string_view separator : {k_helper_separator, k_braced_separator}) {
    std::string suffix = std::string(separator) + kind;
    if (helper.size() <= suffix.size() || !helper.ends_with(suffix)) continue;
    std::string key = helper.substr(0, helper.size() - suffix.size());
    if (separator == k_helper_separator && key.size() >= 2 && key.front() == '{' &&
        key.back() == '}')
      key = key.substr(1, key.size() - 2);
    if (helper_key(key, kind) == helper) return key;
  }
  return std::nullopt;
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

}  // namespace

namespace {

// Locks looked at, or read, in one round trip: few enough that a batch's replies stay small
// (list's memory does not grow with the number of locks), enough that round trips are few.
constexpr size_t k_read_batch = 500;

// Of CANDIDATES (keys of SERVER whose fence counters SCAN found), those a look finds taken,
// added to OUT: a key that is there (its type tells what to read of it), or the places of a
// semaphore or a shared lock. One TYPE per candidate (most fence counters belong to locks
// that are free now), then one EXISTS for the places of those without a key (a semaphore's
// and a shared lock's are in one Cluster slot).
Result<Unit> look_at(Redis& redis, uint32_t server, const std::vector<std::string>& candidates,
                     bool all, std::vector<FoundLock>& out) {
  Pipeline types;
  std::vector<size_t> type;
  for (const std::string& key : candidates) type.push_back(types.add({"TYPE", key}));
  // What the ACL denies (SCAN's names are not filtered by its key patterns: another tenant's
  // locks) is passed over below, as the listing's user cannot read it.
  if (auto done = types.run(redis, Pipeline::Denied::skipped); !done) return done.failure();
  Pipeline places;
  std::vector<std::pair<size_t, size_t>> exists;  // candidate, its EXISTS
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Reply& t = *types[type[i]];
    const std::string& key = candidates[i];
    // An error reply (an ACL denial, or an ASK in a Cluster's resharding: the key has moved
    // on) counts as no key here: a look does not fail the listing.
    if (t.type == Reply::Type::error) continue;
    if (t.str == "string")
      out.push_back({key, server, FoundLock::Seen::value, false});
    else if (t.str != "none")
      out.push_back({key, server, FoundLock::Seen::other, false});
    else
      exists.emplace_back(
          i, places.add({"EXISTS", helper_key(key, "sem"), helper_key(key, "shared")}));
  }
  if (places.empty()) return Unit{};
  if (auto done = places.run(redis, Pipeline::Denied::skipped); !done) return done.failure();
  for (const auto& [i, at] : exists)
    if (places[at]->type == Reply::Type::error)
      continue;
    else if (places[at]->integer > 0)
      out.push_back({candidates[i], server, FoundLock::Seen::places, false});
    else if (all)
      out.push_back({candidates[i], server, FoundLock::Seen::free, false});
  return Unit{};
}

// rlock's locks on one server: every lock rlock took has a fence counter (kept --retention
// after its last use), so SCAN for those, letting the server match the names, and look only
// at the locks they name. Nothing is read of unrelated keys, whatever their number or size.
Result<Unit> find_rlock_locks(Redis& redis, uint32_t server, const std::string& pattern, bool all,
                              std::vector<FoundLock>& out) {
  const std::string glob = fnmatch_pattern(pattern);
  std::string cursor = "0";
  do {
    // With ALL, pauses too (a key paused before it was ever used has no counter): one glob
    // for both, "*:rlock:fence" and "*:rlock:pause", and for the braced keys' ":rlock{}:".
    auto page = scan_page(redis, cursor, all ? "*:rlock*:[fp][ea][nu][cs]e" : "*:rlock*:fence",
                          "string", Clock::now() + redis.command_timeout());
    if (!page) return page.failure();
    std::vector<std::string> candidates;
    for (const std::string& helper : *page) {
      bool pause = helper.ends_with(":pause");
      auto owner = helper_owner(helper, pause ? "pause" : "fence");
      if (owner && ::fnmatch(glob.c_str(), owner->c_str(), 0) == 0)
        candidates.push_back(std::move(*owner));
    }
    for (size_t from = 0; from < candidates.size(); from += k_read_batch) {
      std::vector<std::string> batch(candidates.begin() + from,
                                     candidates.begin() +
                                         std::min(candidates.size(), from + k_read_batch));
      if (auto looked = look_at(redis, server, batch, all, out); !looked) return looked.failure();
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
    if (auto done = ttls.run(redis, Pipeline::Denied::skipped); !done) return done.failure();
    // A plain string is someone's lock only if it expires; without a TTL it is just data.
    for (const auto& [key, at] : keys)
      if (ttls[at]->is_integer() && ttls[at]->integer >= 0)
        out.push_back({*key, server, FoundLock::Seen::value, true});
  } while (cursor != "0");
  return Unit{};
}

// The locks on one server (one primary of a Cluster, one node of Redlock).
Result<Unit> find_on_server(Redis& redis, uint32_t server, const std::string& pattern, bool all,
                            std::vector<FoundLock>& out) {
  if (auto found = find_rlock_locks(redis, server, pattern, all, out); !found) return found;
  if (pattern != "*") {
    // A lock of rlock's that matches is found both ways: find_locks keeps the first.
    if (auto found = find_foreign_locks(redis, server, pattern, out); !found) return found;
  }
  return Unit{};
}

// What to read of F, by what its look saw: another program's lock is its value alone; a key
// of another type is read as status reads it, type first; and its pause. LAST_OUTPUT: when
// its holders last printed too (list --last-output).
LockReads ask_found(Pipeline& p, const FoundLock& f, bool last_output) {
  LockReads r;
  if (f.seen == FoundLock::Seen::other) r.type = p.add({"TYPE", f.key});
  if (f.seen != FoundLock::Seen::places && f.seen != FoundLock::Seen::free) ask_value(p, r, f.key);
  if (f.foreign) return r;
  if (f.seen == FoundLock::Seen::places) ask_places(p, r, f.key);
  ask_waiters_and_history(p, r, f.key);
  if (last_output && f.seen != FoundLock::Seen::free) ask_last_output(p, r, f.key);
  // The pause's text alone: its time left is told by its until= (decode_lock).
  r.pause = p.add({"GET", helper_key(f.key, "pause")});
  return r;
}

// The key's type as F's look saw it, when the read does not ask again.
const char* seen_type(const FoundLock& f) {
  switch (f.seen) {
  case FoundLock::Seen::value: return "string";
  case FoundLock::Seen::places:
  case FoundLock::Seen::free: return "none";
  case FoundLock::Seen::other: return "";  // asked again
  }
  return "";
}

}  // namespace

Result<FoundLocks> find_locks(Redis& redis, const std::string& pattern, bool all) {
  FoundLocks found;
  found.all = all;
  auto scanned = redis.for_each_primary(
      [&](Redis& server) -> Result<Unit> {
        std::vector<FoundLock> here;
        auto index = static_cast<uint32_t>(found.servers.size());
        if (auto done = find_on_server(server, index, pattern, all, here); !done) return done;
        found.servers.push_back(&server);
        found.locks.insert(found.locks.end(), std::make_move_iterator(here.begin()),
                           std::make_move_iterator(here.end()));
        return Unit{};
      },
      Clock::now() + redis.command_timeout());
  if (!scanned) return scanned.failure();
  // Redlock's nodes each hold a copy of a lock: show it once, as a quorum has it.
  if (redis.node_count() > 1) found.redlock = &redis;
  std::stable_sort(found.locks.begin(), found.locks.end(),
                   [](const FoundLock& a, const FoundLock& b) { return a.key < b.key; });
  found.locks.erase(
      std::unique(found.locks.begin(), found.locks.end(),
                  [](const FoundLock& a, const FoundLock& b) { return a.key == b.key; }),
      found.locks.end());
  return found;
}

namespace {

// Whether S, read as F was found, is listed: not when free since it was found, or when free when
// found (--all), unless --all and it has a history or a pause (the failing job whose lock is
// free), or it is held on fewer Redlock nodes than a quorum (its run may still be running);
// not another program's lock that lost its expiry.
bool listed(const FoundLocks& found, const FoundLock& f, const LockState& s) {
  if (s.kind == LockState::Kind::free && !s.minority &&
      (!found.all || (!s.last_run && s.pause.empty())))
    return false;
  return !(f.foreign && s.kind == LockState::Kind::foreign && s.pttl.count() < 0);
}

// Redlock: the locks of FOUND from FROM to TO as a quorum of its nodes has them, in one round
// trip to every node at once.
Result<std::vector<LockState>> read_batch_by_quorum(const FoundLocks& found, size_t from,
                                                    size_t to) {
  std::vector<std::string> keys;
  for (size_t i = from; i < to; ++i) keys.push_back(found.locks[i].key);
  auto states = read_locks(*found.redlock, keys, Unknown::shown);
  if (!states) return states.failure();
  std::vector<LockState> batch;
  for (size_t i = from; i < to; ++i)
    if (listed(found, found.locks[i], (*states)[i - from]))
      batch.push_back(std::move((*states)[i - from]));
  return batch;
}

// The locks of FOUND from FROM to TO, read: one pipelined round trip per server that holds some.
Result<std::vector<LockState>> read_batch(const FoundLocks& found, size_t from, size_t to) {
  if (found.redlock) return read_batch_by_quorum(found, from, to);
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
      reads.emplace_back(i, ask_found(p, found.locks[i], found.last_output));
    }
    if (p.empty()) continue;
    if (auto done = p.run(redis); !done) return done.failure();
    auto now_ms = server_now(redis, p, time);
    if (!now_ms) return now_ms.failure();
    for (const auto& [i, r] : reads) {
      const FoundLock& f = found.locks[i];
      auto s = decode_lock(redis, f.key, seen_type(f), p, r, *now_ms);
      if (!s) return s.failure();
      if (listed(found, f, *s)) states[i - from] = std::move(*s);
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
