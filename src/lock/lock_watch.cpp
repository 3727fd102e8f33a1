#include "lock/lock_watch.h"

#include <algorithm>

#include "lock/check.h"
#include "lock/history.h"
#include "lock/pause.h"

namespace rlock {

std::string missing_classes(const std::string& config_value) {
  std::string missing;
  for (char c : std::string("Kg$xz")) {
    bool in_all = c != 'K' && config_value.find('A') != std::string::npos;
    if (!in_all && config_value.find(c) == std::string::npos) missing += c;
  }
  return missing;
}

namespace {

using Kind = WatchEvent::Kind;
using Evidence = WatchEvent::Evidence;

// Whether S's lock key holds a value: an rlock holder's, a tombstone, another client's.
bool occupied(const LockState& s) {
  return s.kind == LockState::Kind::held || s.kind == LockState::Kind::broken ||
         s.kind == LockState::Kind::foreign;
}

// Whether NOW is the tombstone that `release --force` left in place of LAST's holder.
bool broke(const LockState& last, const LockState& now) {
  if (now.kind != LockState::Kind::broken || !now.value) return false;
  if (last.kind == LockState::Kind::held)
    return last.value && now.value->token == last.value->token;
  return last.kind == LockState::Kind::foreign && now.value->token.empty();
}

// Whether a holder (or a place) whose value was VALUE, with PTTL left SINCE ago, expired
// rather than was released, and what says so. HINTS, the key's keyspace events since then,
// tell it when there are any: the last del or expired (an earlier one may be stale, a message
// that came after the read that showed its effect). Else the time it had left: gone before it
// ran out, it was released; RUN, its run's history entry (which `rlock run` writes as it ends)
// when there is one, confirms a release, and tells of a lock lost (a holder frozen past its
// lease may take as long to say so). A run that ended fine leaves a lock kept for --min-hold
// to expire. After an outage (the hint "outage") nothing but the history can tell: a restart
// without its data loses every lock while its holders run on.
std::pair<bool, Evidence> ending(const std::vector<std::string>& hints,
                                 const std::optional<LockValue>& value,
                                 const std::optional<RunRecord>& run, Millis pttl, Millis since) {
  for (auto hint = hints.rbegin(); hint != hints.rend(); ++hint) {
    if (*hint == "del") return {false, Evidence::notification};
    if (*hint == "expired" || *hint == "evicted") return {true, Evidence::notification};
  }
  bool ran_out = pttl.count() >= 0 && pttl - since <= k_timing_margin;
  // A tombstone carries the broken holder's fence: its run's entry says "lost", but it was
  // the holder's rlock that ended the tombstone.
  // A start entry (its end not read yet, or never written) is no evidence: the ttl is.
  if (value && !value->broken && run && run->ended()) {
    if (run->end == run_end_name(RunEnd::lost)) return {true, Evidence::history};
    if (!ran_out) return {false, Evidence::history};
  }
  if (std::find(hints.begin(), hints.end(), k_outage_hint) != hints.end())
    return {true, Evidence::outage};
  return {ran_out, Evidence::ttl};
}

// How many fences of holders seen a watch remembers: a run's history entry may come a look
// after its release, and must not be taken for a run no look saw.
constexpr size_t k_fences_kept = 64;

// The ttl the holder of NOW renews with: its value says (rlock 0.2 on), else the time left
// when a look saw it taken or renewed, which a poll sees up to its interval late.
Millis lease_of(const LockState& now) {
  if (now.value && now.value->ttl_ms && *now.value->ttl_ms > 0) return Millis(*now.value->ttl_ms);
  return now.pttl;
}

bool has_place(const std::vector<SemaphoreHolder>& places, const std::string& token) {
  return std::any_of(places.begin(), places.end(),
                     [&](const SemaphoreHolder& p) { return p.token == token; });
}

}  // namespace

std::string first_waiter(const LockState& lock) {
  for (const QueuedWaiter& w : lock.queue)
    if (w.place.count() > 0) return w.token;
  return "";
}

namespace {

// An event's lock value and ttl: another holder's or place's than the lock's now.
void about(WatchEvent& e, const std::string& raw, const std::optional<LockValue>& value,
           Millis ttl) {
  e.raw = raw;
  e.value = value;
  e.ttl = ttl;
}

}  // namespace

// What one look compares and tells: the lock now, the runs recorded since the last look, and
// the events found so far.
struct LockWatch::Look {
  const LockState& now;
  TimePoint at;
  const std::vector<std::string>& hints;
  std::vector<RunRecord> fresh;
  std::vector<RunRecord> actions;  // an operator's, recorded since the last look, oldest first
  std::vector<WatchEvent> out;
};

std::vector<WatchEvent> LockWatch::look(const LockState& now, TimePoint at,
                                        const std::vector<std::string>& hints,
                                        const std::vector<RunRecord>& runs) {
  Look l{now, at, hints, {}, {}, {}};
  // The runs recorded since the last look: those read, or else the newest if it is new.
  for (const RunRecord& r : runs) {
    if (is_run(r)) l.fresh.push_back(r);
    if (entry_kind(r.end) == EntryKind::action) l.actions.push_back(r);
  }
  if (runs.empty() && last_ && now.last_run &&
      !(last_->last_run && last_->last_run->id == now.last_run->id))
    l.fresh.push_back(*now.last_run);
  // The holders seen now first: a run's history entry can be there already while its lock is
  // still held (--min-hold), and that run is no run unseen.
  saw_fence(now.value);
  for (const auto* places : {&now.semaphore, &now.shared})
    for (const SemaphoreHolder& p : *places) saw_fence(p.value);
  if (!last_) {
    // Seen mid-lease: only its value can tell the ttl.
    if (now.kind == LockState::Kind::held && now.value && now.value->ttl_ms) lease_ = lease_of(now);
    event(l, Kind::state);
  } else {
    // In the order they can have happened between two looks: a pause's end before what it
    // let be taken; a holder's end before the next holder; the waiter that took the lock
    // leaving the queue as it did; a pause's start after all that (nothing is taken once
    // paused).
    const LockState& last = *last_;
    Millis since = std::chrono::duration_cast<Millis>(at - last_at_);
    look_at_resume(l, last, since);
    look_at_holder(l, last, since);
    look_at_places(l, last, since);
    if (now.waiters != last.waiters)
      event(l, now.waiters > last.waiters ? Kind::queued : Kind::dequeued).was_waiters =
          last.waiters;
    if (!now.pause.empty() && now.pause != last.pause) {
      event(l, Kind::paused).ttl = now.pause_pttl;
      pause_told_ = now.pause;
    }
    // An operator's actions last, in the order they were recorded: each is written just after
    // what it did, so the events above told that first.
    for (RunRecord& a : l.actions)
      if (!told_already(a)) event(l, Kind::action).run = std::move(a);
  }
  holder_run_ = run_of(l, now.value);
  last_ = now;
  last_at_ = at;
  return std::move(l.out);
}

std::optional<RunRecord> LockWatch::run_of(const Look& l,
                                           const std::optional<LockValue>& value) const {
  if (!value || !value->fence || value->broken) return std::nullopt;
  for (auto r = l.fresh.rbegin(); r != l.fresh.rend(); ++r)
    if (r->fence == *value->fence) return *r;
  for (const std::optional<RunRecord>& known : {holder_run_, l.now.last_run})
    if (known && known->fence == *value->fence) return known;
  return std::nullopt;
}

WatchEvent& LockWatch::event(Look& l, Kind kind) const {
  WatchEvent& e = l.out.emplace_back();
  e.kind = kind;
  e.lock = l.now;
  e.raw = l.now.raw;
  e.value = l.now.value;
  e.ttl = l.now.pttl;
  e.lease = lease_;
  return e;
}

WatchEvent& LockWatch::gone(Look& l, bool place, const std::string& raw,
                            const std::optional<LockValue>& value, Millis ttl, Millis since) {
  auto run = run_of(l, value);
  auto [expired, evidence] = ending(l.hints, value, run, ttl, since);
  WatchEvent& e = event(l, place ? (expired ? Kind::place_expired : Kind::place_released)
                                 : (expired ? Kind::expired : Kind::released));
  about(e, raw, value, ttl);
  e.evidence = evidence;
  e.run = run;
  return e;
}

void LockWatch::look_at_holder(Look& l, const LockState& last, Millis since) {
  const LockState& now = l.now;
  // rlock never rewrites a holder's value (a renewal is a PEXPIRE): the same value is the same
  // holder, and the same acquisition. Under Redlock the value shown may come from another node
  // than the last look's, with that node's fence: the same token is the same holder.
  bool same = occupied(last) && occupied(now) &&
              (last.raw == now.raw || (last.kind == now.kind && last.value && now.value &&
                                       last.value->token == now.value->token));
  if (last.kind == LockState::Kind::not_a_lock || now.kind == LockState::Kind::not_a_lock) {
    if (last.kind != now.kind || last.type != now.type) event(l, Kind::state);
  } else if (!same) {
    if (occupied(last) && !broke(last, now)) {
      WatchEvent& e = gone(l, false, last.raw, last.value, last.pttl, since);
      if (taken_at_) e.held = std::chrono::duration_cast<Millis>(l.at - *taken_at_);
    }
    ran_unseen(last, now, l.fresh, l.out);
    lease_ = now.kind == LockState::Kind::held && now.pttl.count() >= 0 ? lease_of(now) : Millis(0);
    said_overdue_ = false;
    taken_at_.reset();
    if (occupied(now)) {
      event(l, now.kind == LockState::Kind::broken ? Kind::broken : Kind::taken);
      if (now.kind == LockState::Kind::broken && now.value && now.value->fence) {
        broken_told_.push_back(*now.value->fence);
        if (broken_told_.size() > k_fences_kept) broken_told_.erase(broken_told_.begin());
      }
      if (!broke(last, now)) taken_at_ = l.at;
    }
  } else if (now.kind == LockState::Kind::held && last.pttl.count() >= 0 && now.pttl.count() >= 0) {
    Millis expected = last.pttl - since;
    // Its run's history entry is written as the run ends: a lock still held then is kept for
    // --min-hold, with a last expiry and no renewal to wait for.
    if (run_of(l, now.value)) {
      lease_ = Millis(0);
    } else if (now.pttl > expected + k_timing_margin) {
      // Renewed since the last look; at the latest just now, so with this much left at least.
      Millis left = std::max(Millis(0), expected);
      if (renewal_late(left, lease_of(now))) event(l, Kind::renewed_late).left = left;
      lease_ = lease_of(now);
      said_overdue_ = false;
      if (!l.out.empty()) l.out.back().lease = lease_;
    } else if (lease_.count() > 0 && !said_overdue_ && renewal_late(now.pttl, lease_)) {
      event(l, Kind::overdue);
      said_overdue_ = true;
    }
  }
}

void LockWatch::look_at_resume(Look& l, const LockState& last, Millis since) {
  if (!l.now.pause.empty() || last.pause.empty()) return;
  // Resumed, or its time was up: the time it had left at the last look tells.
  WatchEvent& e = event(l, Kind::resumed);
  bool ran_out = last.pause_pttl.count() >= 0 && last.pause_pttl - since <= k_timing_margin;
  e.evidence = ran_out ? Evidence::ttl : Evidence::none;
  e.raw = last.pause;
}

void LockWatch::look_at_places(Look& l, const LockState& last, Millis since) {
  for (bool shared : {false, true}) {
    const auto& before = shared ? last.shared : last.semaphore;
    const auto& after = shared ? l.now.shared : l.now.semaphore;
    for (const SemaphoreHolder& p : before) {
      if (has_place(after, p.token)) continue;
      WatchEvent& e = gone(l, true, p.raw, p.value, p.ttl, since);
      e.shared = shared;
      e.lease = Millis(0);
    }
    for (const SemaphoreHolder& p : after) {
      if (has_place(before, p.token)) continue;
      WatchEvent& e = event(l, Kind::place_taken);
      about(e, p.raw, p.value, p.ttl);
      e.shared = shared;
      e.lease = Millis(0);
    }
  }
}

bool LockWatch::told_already(const RunRecord& action) const {
  if (action.end == run_end_name(RunEnd::pause)) {
    auto told = decode_pause(pause_told_);
    return told && told->by == action.by && told->until == action.until;
  }
  if (action.end == run_end_name(RunEnd::forced_release))
    return std::find(broken_told_.begin(), broken_told_.end(), action.fence) != broken_told_.end();
  return false;
}

void LockWatch::saw_fence(const std::optional<LockValue>& value) {
  if (!value || !value->fence || value->broken) return;
  if (std::find(fences_.begin(), fences_.end(), *value->fence) != fences_.end()) return;
  fences_.push_back(*value->fence);
  if (fences_.size() > k_fences_kept) fences_.erase(fences_.begin());
}

void LockWatch::ran_unseen(const LockState& last, const LockState& now,
                           const std::vector<RunRecord>& runs, std::vector<WatchEvent>& out) {
  // A semaphore's or a shared lock's run held a place.
  bool places = !last.semaphore.empty() || !now.semaphore.empty() || !last.shared.empty() ||
                !now.shared.empty();
  bool shared = !last.shared.empty() || !now.shared.empty();
  // A run is as its newest entry says (RunsOnce): the last of its attempts under --retry.
  RunsOnce once;
  std::vector<const RunRecord*> ended;
  for (auto r = runs.rbegin(); r != runs.rend(); ++r)
    if (once.ended(*r)) ended.push_back(&*r);
  for (auto r = ended.rbegin(); r != ended.rend(); ++r) {
    const RunRecord& run = **r;
    if (run.fence <= 0 || std::find(fences_.begin(), fences_.end(), run.fence) != fences_.end())
      continue;
    LockValue value;
    value.holder = run.holder;
    value.fence = run.fence;
    saw_fence(value);
    bool lost = run.end == run_end_name(RunEnd::lost) || !run.ended();
    for (Kind kind : {places ? Kind::place_taken : Kind::taken,
                      places ? (lost ? Kind::place_expired : Kind::place_released)
                             : (lost ? Kind::expired : Kind::released)}) {
      WatchEvent& e = out.emplace_back();
      e.kind = kind;
      e.lock = now;
      e.value = value;
      e.evidence = Evidence::history;
      e.shared = shared && places;
      e.run = run;
      if (kind != Kind::taken && kind != Kind::place_taken) e.held = Millis(run.held_ms);
    }
  }
}

std::optional<TimePoint> LockWatch::due() const {
  if (!last_) return std::nullopt;
  std::optional<TimePoint> out;
  auto at = [&](Millis after) {
    TimePoint t = last_at_ + std::max(Millis(0), after);
    if (!out || t < *out) out = t;
  };
  // The moment less than half of the lease is left.
  if (last_->kind == LockState::Kind::held && lease_.count() > 0 && !said_overdue_ &&
      last_->pttl.count() >= 0)
    at(last_->pttl - lease_ / 2 + Millis(1));
  for (const auto* places : {&last_->semaphore, &last_->shared})
    for (const SemaphoreHolder& p : *places) at(p.ttl + Millis(1));
  return out;
}

}  // namespace rlock
