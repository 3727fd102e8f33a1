#include "print/lock_view.h"

#include <algorithm>

namespace rlock {

namespace {

// When H's command last printed, from S's record of the kept runs' last output, by its fence.
void view_last_output(HolderView& h, const LockState& s, WallTime now) {
  if (!h.fence || h.broken) return;
  auto last = s.last_output.find(*h.fence);
  if (last == s.last_output.end()) return;
  h.last_output = WallTime(Millis(last->second));
  h.last_output_ago = std::max(Millis(0), now - *h.last_output);
}

std::vector<PlaceView> view_places(const std::vector<SemaphoreHolder>& places, const LockState& s,
                                   WallTime now) {
  std::vector<PlaceView> out;
  out.reserve(places.size());
  for (const SemaphoreHolder& h : places) {
    PlaceView p{h.token, h.raw, h.ttl, std::nullopt};
    if (h.value) {
      p.holder = view_holder(*h.value, now);
      view_last_output(*p.holder, s, now);
      if (h.phase) p.holder->phase = view_phase(*h.phase, now.time_since_epoch().count());
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace

PhaseView view_phase(const StoredPhase& stored, int64_t now_ms) {
  return {stored.phase, Millis(std::max<int64_t>(0, now_ms - stored.since_ms)),
          Millis(stored.due_ms - now_ms), stored.since_ms, stored.due_ms};
}

HolderView view_holder(const LockValue& v, WallTime now) {
  HolderView h;
  h.who = v.holder;
  h.liveness = holder_liveness(v.holder);
  h.token = v.token;
  h.fence = v.fence;
  h.broken = v.broken;
  if (v.broken) h.broken_ago = std::max(Millis(0), now - v.broken->at);
  h.held = std::max(Millis(0), now - v.holder.since);
  if (h.liveness == Liveness::running && !v.broken) h.command_pid = holder_command_pid(v.holder);
  return h;
}

LockView view_lock(const LockState& s, WallTime now) {
  // Held for how long, ended how long ago: by the server's clock, which times the holders
  // and the runs (a host whose clock is off would say "held for 0ms" of a run of seconds).
  if (s.now_ms > 0) now = WallTime(Millis(s.now_ms));
  LockView v;
  v.key = s.key;
  v.kind = s.kind;
  if (s.kind == LockState::Kind::not_a_lock) v.type = s.type;
  v.has_value = s.kind == LockState::Kind::held || s.kind == LockState::Kind::broken ||
                s.kind == LockState::Kind::foreign;
  if (v.has_value) {
    v.value = s.raw;
    v.ttl = s.pttl;
  }
  if (s.value) {
    v.holder = view_holder(*s.value, now);
    view_last_output(*v.holder, s, now);
    if (s.phase) v.holder->phase = view_phase(*s.phase, now.time_since_epoch().count());
  }
  v.waiters = s.waiters;
  v.queue = s.queue;
  v.semaphore = view_places(s.semaphore, s, now);
  v.shared = view_places(s.shared, s, now);
  v.not_shown = s.not_shown;
  v.fence_counter = s.fence_counter;
  v.fence_counter_kept = s.fence_counter_pttl;
  v.history_kept = s.history_pttl;
  v.last_run = s.last_run;
  v.pause_raw = s.pause;
  v.pause_ttl = s.pause_pttl;
  if (!s.pause.empty()) v.pause = decode_pause(s.pause);
  v.votes = s.votes;
  v.minority = s.minority;
  if (s.last_run) {
    // Its entry's ID: the server's clock at its end (at its start, for one that reported none).
    WallTime ended(Millis(history_entry_ms(s.last_run->id)));
    v.last_run_ago = std::max(Millis(0), now - ended);
  }
  return v;
}

}  // namespace rlock
