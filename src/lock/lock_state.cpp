#include "lock/lock_state.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

#include "lock/check.h"
#include "lock/kept_output.h"
#include "lock/lock.h"
#include "lock/lock_reads.h"
#include "lock/pause.h"
#include "redis/redlock.h"

namespace rlock {

namespace {

// The most members and fields read (k_places_read_most), and ZRANGE's bounds for the first
// and the last that many members, as commands' arguments.
const std::string k_read_most_arg = std::to_string(k_places_read_most);
const std::string k_last_read = std::to_string(k_places_read_most - 1);
const std::string k_first_read = std::to_string(-k_places_read_most);

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

// The places of a semaphore or a shared lock that have not expired, from a ZRANGE WITHSCORES of
// their expiries and an HSCAN of their values.
std::vector<SemaphoreHolder> live_places(const Reply& expiries, const Reply* scan, int64_t now_ms) {
  std::map<std::string, std::string> values;
  if (scan && scan->is_array() && scan->elements.size() == 2 && scan->elements[1].is_array()) {
    const auto& pairs = scan->elements[1].elements;
    for (size_t j = 0; j + 1 < pairs.size(); j += 2) values[pairs[j].str] = pairs[j + 1].str;
  }
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

// How many members of a sorted set were not read: its ZCARD reply (COUNT) less the members of
// its ZRANGE reply (READ), which has PER elements for each member.
int64_t unread(const Pipeline& p, size_t count, size_t read, size_t per) {
  const Reply* total = p[count];
  const Reply* members = p[read];
  if (!total || !total->is_integer() || !members || !members->is_array()) return 0;
  return std::max<int64_t>(0,
                           total->integer - static_cast<int64_t>(members->elements.size() / per));
}

// The waiters and places of R not read (LockState::not_shown). A waiter is in both the queue
// and the places that say it is alive: counted once.
int64_t not_shown(const Pipeline& p, const LockReads& r) {
  return std::max(unread(p, r.queue_count, r.queue, 2), unread(p, r.alive_count, r.alive, 2)) +
         unread(p, r.semaphore_count, r.semaphore, 2) + unread(p, r.shared_count, r.shared, 2);
}

// The helper keys that R asked of and that hold another type than rlock keeps there, named.
std::vector<std::string> wrong_types(const Redis& redis, const Pipeline& p, const LockReads& r) {
  std::vector<std::string> out;
  for (size_t at : {r.type,
                    r.value,
                    r.pttl,
                    r.fence,
                    r.fence_pttl,
                    r.history_pttl,
                    r.alive,
                    r.alive_count,
                    r.queue,
                    r.queue_count,
                    r.sharers,
                    r.semaphore,
                    r.semaphore_count,
                    r.semaphore_values,
                    r.shared,
                    r.shared_count,
                    r.shared_values,
                    r.history,
                    r.pause,
                    r.pause_pttl,
                    r.ended,
                    r.phases,
                    r.last_output})
    if (auto message = p.wrong_type(redis, at)) out.push_back(std::move(*message));
  return out;
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
  // The first waiters in arrival order, and which of the first want to share.
  r.queue = p.add({"ZRANGE", helper_key(key, "queue"), "0", k_last_read, "WITHSCORES"});
  r.queue_count = p.add({"ZCARD", helper_key(key, "queue")});
  // How many the places are, which list does not ask (a command fewer per lock listed): its
  // count of waiters stops at the bound unsaid.
  r.alive_count = p.add({"ZCARD", helper_key(key, "alive")});
  r.sharers = p.add({"ZRANGE", helper_key(key, "shared-waiters"), "0", k_last_read});
  r.pause = p.add({"GET", helper_key(key, "pause")});
  r.pause_pttl = p.add({"PTTL", helper_key(key, "pause")});
  // Not shown: asked so that another type there, on which every run's end fails, is named.
  r.ended = p.add({"ZCARD", helper_key(key, "ended")});
  r.phases = p.add({"HSCAN", helper_key(key, "phase"), "0", "COUNT", k_read_most_arg});
  ask_last_output(p, r, key);
  return r;
}

// The newest run that ran, in HISTORY (XREVRANGE) of the lock S: skipped ones (--record-skips)
// and resets say nothing of the job, nor does the run that holds it now (S shows it), whose
// newest entry is a start, its earlier attempts' ends included (RunsOnce); a start whose run no
// longer holds it is a run that died (settle_starts).
std::optional<RunRecord> last_run(const LockState& s, const Reply& history) {
  std::vector<int64_t> held = held_fences(s);
  RunsOnce once;
  for (const Reply& entry : history.elements) {
    auto run = decode_history_entry(entry);
    if (!run) continue;
    std::vector<RunRecord> one{std::move(*run)};
    settle_starts(one, held);
    if (once.ended(one[0])) return std::move(one[0]);
  }
  return std::nullopt;
}

// The waiters of S from what R asked in P: how many are alive, and the queue in arrival order.
void decode_waiters(const Pipeline& p, const LockReads& r, int64_t now_ms, LockState& s) {
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
}

// The phases of S's holders (run_phase.h) from an HSCAN of the phase hash: each holder's own,
// found by its token; a field no holder has now (its run gone, its field not expired yet) is
// passed over.
void decode_phases(const Reply* scan, LockState& s) {
  if (!scan || !scan->is_array() || scan->elements.size() != 2 || !scan->elements[1].is_array())
    return;
  std::map<std::string, std::string_view> stored;
  const auto& pairs = scan->elements[1].elements;
  for (size_t j = 0; j + 1 < pairs.size(); j += 2) stored[pairs[j].str] = pairs[j + 1].str;
  auto phase_of = [&](const std::string& token) -> std::optional<StoredPhase> {
    auto it = stored.find(token);
    if (it == stored.end()) return std::nullopt;
    return decode_run_phase(it->second);
  };
  if (s.kind == LockState::Kind::held && s.value) s.phase = phase_of(s.value->token);
  for (auto* places : {&s.semaphore, &s.shared})
    for (SemaphoreHolder& place : *places) place.phase = phase_of(place.token);
}

}  // namespace

void ask_value(Pipeline& p, LockReads& r, const std::string& key) {
  // At most k_value_read_most bytes: a value larger is no lock's, and is shown cut.
  r.value = p.add({"GETRANGE", key, "0", std::to_string(k_value_read_most - 1)}, true);
  r.pttl = p.add({"PTTL", key});
}

void ask_places(Pipeline& p, LockReads& r, const std::string& key) {
  // The latest expiries, the live places, in the order of their expiries; the values of as many
  // (HSCAN returns all of a hash that small, and about that many of a larger one).
  auto ask = [&](const char* places, const char* values, size_t& read, size_t& count,
                 size_t& read_values) {
    read = p.add({"ZRANGE", helper_key(key, places), k_first_read, "-1", "WITHSCORES"});
    count = p.add({"ZCARD", helper_key(key, places)});
    read_values = p.add({"HSCAN", helper_key(key, values), "0", "COUNT", k_read_most_arg});
  };
  ask("sem", "holders", r.semaphore, r.semaphore_count, r.semaphore_values);
  ask("shared", "shared-values", r.shared, r.shared_count, r.shared_values);
}

void ask_last_output(Pipeline& p, LockReads& r, const std::string& key) {
  // The newest: all that rlock keeps there, one member per kept run.
  r.last_output = p.add({"ZREVRANGE", helper_key(key, "last-output"), "0",
                         std::to_string(k_kept_runs - 1), "WITHSCORES"});
}

void ask_waiters_and_history(Pipeline& p, LockReads& r, const std::string& key) {
  // The latest expiries: the waiters that are alive, unless more than the bound are.
  r.alive = p.add({"ZRANGE", helper_key(key, "alive"), k_first_read, "-1", "WITHSCORES"});
  // The newest run that ran is among the last few: skipped runs and resets are passed over.
  r.history = p.add({"XREVRANGE", helper_key(key, "history"), "+", "-", "COUNT", "10"});
}

Result<LockState> decode_lock(Redis& redis, const std::string& key, const std::string& type,
                              const Pipeline& p, const LockReads& r, int64_t now_ms) {
  LockState s;
  s.key = key;
  s.type = type;
  // The type decides; GET's WRONGTYPE for a non-string is expected and ignored.
  if (const Reply* t = p[r.type]) {
    if (t->type == Reply::Type::error) return redis.server_failure(t->str, p.command(r.type));
    s.type = t->str;
  }
  const Reply* value = p[r.value];
  if (value && value->is_string()) s.raw = value->str;
  if (const Reply* pttl = p[r.pttl]) {
    if (pttl->type == Reply::Type::error) return redis.server_failure(pttl->str, p.command(r.pttl));
    if (pttl->is_integer()) s.pttl = Millis(pttl->integer);
  }
  if (const Reply* pause = p[r.pause]; pause && pause->is_string()) {
    s.pause = pause->str;
    if (const Reply* left = p[r.pause_pttl]; left && left->is_integer())
      s.pause_pttl = Millis(left->integer);
    else if (auto pause = decode_pause(s.pause))  // not asked (list): its until= tells
      if (auto until = parse_rfc3339(pause->until))
        s.pause_pttl = Millis(std::max<int64_t>(0, until->time_since_epoch().count() - now_ms));
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
  decode_waiters(p, r, now_ms, s);
  if (const Reply* last = p[r.last_output]; last && last->is_array())
    for (size_t j = 0; j + 1 < last->elements.size(); j += 2)
      s.last_output[std::atoll(last->elements[j].str.c_str())] =
          static_cast<int64_t>(std::strtod(last->elements[j + 1].str.c_str(), nullptr));
  if (const Reply* places = p[r.semaphore])
    s.semaphore = live_places(*places, p[r.semaphore_values], now_ms);
  if (const Reply* places = p[r.shared])
    s.shared = live_places(*places, p[r.shared_values], now_ms);
  s.not_shown = not_shown(p, r);
  s.wrong_types = wrong_types(redis, p, r);
  // Changed between TYPE and GET: show it as it was typed, without a value.
  if (s.type == "string" && !(value && value->is_string())) s.type = "none";
  classify(s);
  decode_phases(p[r.phases], s);
  s.now_ms = now_ms;
  if (const Reply* history = p[r.history]; history && history->is_array()) {
    s.last_run = last_run(s, *history);
    const auto& newest = history->elements;
    if (!newest.empty() && newest[0].is_array() && !newest[0].elements.empty())
      s.newest_entry = newest[0].elements[0].str;
  }
  return s;
}

Result<int64_t> server_now(Redis& redis, const Pipeline& p, size_t at) {
  const Reply& time = *p[at];
  if (time.type == Reply::Type::error) return redis.server_failure(time.str, p.command(at));
  auto now = server_time_ms(time);
  if (!now) return unexpected_reply("TIME");
  return *now;
}

std::vector<int64_t> held_fences(const LockState& s) {
  std::vector<int64_t> held;
  if (s.value && s.value->fence) held.push_back(*s.value->fence);
  for (const auto* places : {&s.semaphore, &s.shared})
    for (const SemaphoreHolder& place : *places)
      if (place.value && place.value->fence) held.push_back(*place.value->fence);
  return held;
}

namespace {

// What read_locks() asked in P of each of KEYS, as the server REDIS that answered it saw it.
struct LocksRead {
  const std::vector<std::string>& keys;
  std::vector<LockReads> reads;
  size_t time = k_not_asked;

  Result<std::vector<LockState>> decode(Redis& redis, const Pipeline& p) const {
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
};

// A stream entry's ID ("ms-seq") in the order of the entries: one node's history against
// another's is ordered by their clocks.
std::pair<uint64_t, uint64_t> id_order(const std::string& id) {
  size_t dash = id.find('-');
  return {std::strtoull(id.c_str(), nullptr, 10),
          dash == std::string::npos ? 0 : std::strtoull(id.c_str() + dash + 1, nullptr, 10)};
}

// Whether A and B show the same lock: the same holder (rlock's values differ from node to node
// in their fence, each node counting its own), the same other value, or both free.
bool same_lock(const LockState& a, const LockState& b) {
  if (a.kind != b.kind || a.type != b.type) return false;
  if (a.value && b.value) return a.value->token == b.value->token;
  return a.raw == b.raw;
}

// The K-th longest of TTLS (K from 1): how long K of them last. -1 (no expiry) is the longest.
Millis kth_longest(std::vector<Millis> ttls, size_t k) {
  auto longer = [](Millis a, Millis b) {
    return a.count() == -1 ? b.count() != -1 : b.count() != -1 && a > b;
  };
  std::sort(ttls.begin(), ttls.end(), longer);
  return ttls[std::min(k, ttls.size()) - 1];
}

// How many of VIEWS show the same lock as S, and how long each of them keeps it.
std::vector<Millis> ttls_alike(const std::vector<LockState>& views, const LockState& s) {
  std::vector<Millis> ttls;
  for (const LockState& v : views)
    if (same_lock(v, s)) ttls.push_back(v.pttl);
  return ttls;
}

// The value that most of VIEWS hold (between two held as widely, the one that lasts longer),
// as the node with the largest fence has it (its run's fence); null when all are free.
const LockState* most_held(const std::vector<LockState>& views) {
  auto weight = [&](const LockState& v) {
    auto ttls = ttls_alike(views, v);
    return std::pair(ttls.size(), kth_longest(ttls, 1).count());
  };
  const LockState* most = nullptr;
  for (const LockState& v : views)
    if (v.kind != LockState::Kind::free && (!most || weight(v) > weight(*most))) most = &v;
  auto fence = [](const LockState& v) { return v.value ? v.value->fence.value_or(0) : 0; };
  for (const LockState& v : views)
    if (most && same_lock(v, *most) && fence(v) > fence(*most)) most = &v;
  return most;
}

// VIEWS' lock free, with MOST, held on fewer nodes than a quorum, as its minority.
LockState free_with_minority(const std::vector<LockState>& views, const LockState* most) {
  auto free = std::find_if(views.begin(), views.end(),
                           [](const LockState& v) { return v.kind == LockState::Kind::free; });
  LockState out = free != views.end() ? *free : views.front();
  out.kind = LockState::Kind::free;
  out.type = "none";
  out.raw.clear();
  out.value.reset();
  out.phase.reset();
  out.pttl = Millis(-2);
  if (most) {
    auto ttls = ttls_alike(views, *most);
    out.minority = Minority{most->raw, kth_longest(ttls, 1), ttls.size()};
  }
  return out;
}

// The lock as the nodes that answered (VIEWS, each one's state of one key) say it is: held when
// a quorum of all the nodes holds its most held value, for as long as a quorum keeps it (the
// quorum-th longest ttl); free when no quorum can hold it, even with the nodes that did not
// answer; else free but not known. Sets VOTES.agree and VOTES.known.
LockState holder_by_quorum(const std::vector<LockState>& views, NodeVotes& votes) {
  size_t quorum = redlock_quorum(votes.nodes);
  const LockState* most = most_held(views);
  auto ttls = most ? ttls_alike(views, *most) : std::vector<Millis>{};
  if (ttls.size() >= quorum) {
    LockState out = *most;
    out.pttl = kth_longest(ttls, quorum);
    votes.agree = ttls.size();
    return out;
  }
  votes.known = ttls.size() + votes.unanswered.size() < quorum;
  votes.agree =
      static_cast<size_t>(std::count_if(views.begin(), views.end(), [](const LockState& v) {
        return v.kind == LockState::Kind::free;
      }));
  return free_with_minority(views, most);
}

// What OUT, the lock by quorum, takes from every node of VIEWS: the largest fence counter, the
// newest run (each run's entries went to one node), the waiters a node has most of, every
// helper key of another type. A pause counts once it is on so many of the NODES that no quorum
// is left without it, for as long as that many keep it (UNANSWERED: the nodes that did not
// answer, which may have it too).
void gather(const std::vector<LockState>& views, size_t nodes, size_t unanswered, LockState& out) {
  std::vector<Millis> pauses;
  out.pause.clear();  // the longest-lived of them
  for (const LockState& v : views) {
    if (v.fence_counter > out.fence_counter) out.fence_counter = v.fence_counter;
    out.fence_counter_pttl = std::max(out.fence_counter_pttl, v.fence_counter_pttl);
    out.history_pttl = std::max(out.history_pttl, v.history_pttl);
    if (v.last_run && (!out.last_run || id_order(v.last_run->id) > id_order(out.last_run->id)))
      out.last_run = v.last_run;
    if (id_order(v.newest_entry) > id_order(out.newest_entry)) out.newest_entry = v.newest_entry;
    if (v.waiters > out.waiters) {
      out.waiters = v.waiters;
      out.queue = v.queue;
    }
    out.not_shown = std::max(out.not_shown, v.not_shown);
    out.last_output.insert(v.last_output.begin(), v.last_output.end());
    for (const std::string& message : v.wrong_types)
      if (std::find(out.wrong_types.begin(), out.wrong_types.end(), message) ==
          out.wrong_types.end())
        out.wrong_types.push_back(message);
    if (!v.pause.empty()) {
      if (pauses.empty() || v.pause_pttl > *std::max_element(pauses.begin(), pauses.end()))
        out.pause = v.pause;
      pauses.push_back(v.pause_pttl);
    }
  }
  // Shown too when so many nodes did not answer that it may be on enough: an operator is
  // better told of a pause that may keep runs out than not.
  size_t blocking = nodes - redlock_quorum(nodes) + 1;
  bool shown = !pauses.empty() && pauses.size() + unanswered >= blocking;
  out.pause_pttl = shown ? kth_longest(pauses, std::min(blocking, pauses.size())) : Millis(-2);
  if (!shown) out.pause.clear();
}

// ": " and why each node of VOTES that did not answer gave no answer.
std::string why(const NodeVotes& votes) {
  std::string out;
  for (const std::string& failure : votes.failures) out += (out.empty() ? ": " : "; ") + failure;
  return out;
}

// Redlock: KEYS as every node sees them, read from all at once; each key as a quorum says, and
// what UNKNOWN says of a key whose state is not known.
Result<std::vector<LockState>> read_by_quorum(Redis& redis, const Pipeline& p,
                                              const LocksRead& asked, Unknown unknown) {
  std::vector<std::vector<LockState>> views(asked.keys.size());  // [key][node that answered]
  NodeVotes votes;
  votes.nodes = redis.node_count();
  auto replies = p.broadcast(redis);
  for (size_t i = 0; i < replies.size(); ++i) {
    auto states = replies[i] ? asked.decode(redis.node(i), *replies[i])
                             : Result<std::vector<LockState>>(replies[i].failure());
    if (!states) {
      votes.unanswered.push_back(redis.node(i).name());
      votes.failures.push_back(states.failure().message);
      continue;
    }
    for (size_t k = 0; k < asked.keys.size(); ++k) views[k].push_back(std::move((*states)[k]));
  }
  votes.answered = votes.nodes - votes.unanswered.size();
  size_t quorum = redlock_quorum(votes.nodes);
  if (votes.answered < quorum)
    return Failure{Failure::Kind::connect, std::to_string(votes.answered) + " of " +
                                               std::to_string(votes.nodes) +
                                               " Redlock nodes answered, fewer than a quorum (" +
                                               std::to_string(quorum) + ")" + why(votes)};
  std::vector<LockState> out;
  for (const auto& key_views : views) {
    NodeVotes key_votes = votes;
    LockState s = holder_by_quorum(key_views, key_votes);
    if (!key_votes.known && unknown == Unknown::fails)
      return Failure{Failure::Kind::connect,
                     s.key + ": held on " + std::to_string(s.minority->nodes) + " of " +
                         std::to_string(votes.nodes) + " Redlock nodes, and " +
                         std::to_string(votes.unanswered.size()) +
                         " did not answer: whether a quorum holds it is not known" + why(votes)};
    gather(key_views, votes.nodes, votes.unanswered.size(), s);
    s.votes = std::move(key_votes);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

Result<std::vector<LockState>> read_locks(Redis& redis, const std::vector<std::string>& keys,
                                          Unknown unknown) {
  // Plain pipelined reads, not MULTI: a server out of memory refuses to queue commands inside
  // MULTI, and that is when an operator most needs to look.
  Pipeline p;
  LocksRead asked{keys, {}, p.add({"TIME"})};
  asked.reads.reserve(keys.size());
  for (const auto& key : keys) asked.reads.push_back(ask_everything(p, key));
  if (redis.node_count() > 1) return read_by_quorum(redis, p, asked, unknown);
  if (auto done = p.run(redis); !done) return done.failure();
  return asked.decode(redis, p);
}
}  // namespace rlock
