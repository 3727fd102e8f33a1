// watch: the first line, then one timestamped line per event (or one JSON object a line).
#include "print/print_json.h"
#include "print/print_text.h"

namespace rlock {

namespace {

// "web-2 pid 4121 (report.sh)", or "another client (value "...")".
std::string who(const std::optional<LockValue>& value, const std::string& raw) {
  if (!value || (value->token.empty() && value->holder.host.empty()))
    return "another client (value \"" + printable(raw, 40) + "\")";
  return holder_text(value->holder);
}

// "free in 28.4s unless renewed"
std::string free_in(Millis ttl) {
  return ttl.count() < 0 ? "it never expires"
                         : "free in " + format_duration(ttl) + " unless renewed";
}

// ", first in line 3f2a9c41..." when a waiter is known.
std::string first_in_line(const LockState& lock) {
  std::string first = first_waiter(lock);
  return first.empty() ? "" : ", first in line " + first.substr(0, 8) + "...";
}

// "; 2 waiting, first in line 3f2a9c41..." for a lock that has waiters.
std::string waiting_text(const LockState& lock) {
  if (lock.waiters <= 0) return "";
  return "; " + std::to_string(lock.waiters) + " waiting" + first_in_line(lock);
}

// How a release or an expiry was told from the other, when no keyspace event said.
std::string evidence_text(WatchEvent::Evidence evidence) {
  switch (evidence) {
  case WatchEvent::Evidence::history: return " (as its run's history entry says)";
  case WatchEvent::Evidence::ttl: return " (judged by the ttl it had left)";
  case WatchEvent::Evidence::outage:
    return " while Redis was unreachable (or lost, if Redis restarted without its data: then "
           "its holder may still be running)";
  case WatchEvent::Evidence::none:
  case WatchEvent::Evidence::notification: break;
  }
  return "";
}

// Whether the run of the holder E is about has ended well (its history entry is there), so
// that its lock was kept for --min-hold.
bool run_over(const WatchEvent& e) {
  return e.run && e.run->ended() && e.run->end != run_end_name(RunEnd::lost);
}

// ": exit 3", ": hung (79)": how the run of the holder E is about ended, when its history entry
// is there already; the first thing an operator asks of a release.
std::string run_result(const WatchEvent& e) { return e.run ? ": " + result_text(*e.run) : ""; }

// " after 12.3s": how long the holder of a release held the lock, when that is known.
std::string held_for(Millis held) {
  return held.count() < 0 ? "" : " after " + format_duration(held);
}

// "2 places held (semaphore)", "1 shared holder"
std::string places_text(const WatchEvent& e) {
  size_t n = e.shared ? e.lock.shared.size() : e.lock.semaphore.size();
  if (e.shared) return std::to_string(n) + (n == 1 ? " shared holder" : " shared holders");
  return std::to_string(n) + (n == 1 ? " place" : " places") + " held (semaphore)";
}

// " (rlock renews with 20s left)", when the holder's ttl is known.
std::string renews_text(const WatchEvent& e) {
  return e.lease.count() > 0 ? " (rlock renews with " + format_duration(e.lease * 2 / 3) + " left)"
                             : "";
}

// ", fence 17"
std::string fence_text(const WatchEvent& e) {
  return e.value && e.value->fence ? ", fence " + std::to_string(*e.value->fence) : "";
}

// After a taken: when it is free unless renewed; a run no look saw is gone already.
std::string until_text(const WatchEvent& e) {
  return e.evidence == WatchEvent::Evidence::history
             ? ", between two looks" + evidence_text(e.evidence)
             : "; " + free_in(e.ttl);
}

// The first look: the lock's status line, and who waits.
std::string state_event_text(const WatchEvent& e, WallTime now, const OutputStyle& style) {
  LockView v = view_lock(e.lock, now);
  // The details of a held lock say how many wait already.
  std::string waiting = lock_details(v).find(" waiting") == std::string::npos
                            ? waiting_text(e.lock)
                            : first_in_line(e.lock);
  return state_text(v, style) + waiting;
}

std::string released_text(const WatchEvent& e, const OutputStyle& style) {
  std::string subject = who(e.value, e.raw);
  if (e.value && e.value->broken)
    return paint(style, "32", "released") + ": the broken holder " + subject + " has stopped" +
           evidence_text(e.evidence) + waiting_text(e.lock);
  return paint(style, "32", "released") + " by " + subject + held_for(e.held) + run_result(e) +
         evidence_text(e.evidence) + waiting_text(e.lock);
}

std::string expired_text(const WatchEvent& e, const OutputStyle& style) {
  std::string subject = who(e.value, e.raw);
  if (e.value && e.value->broken)
    return paint(style, "31", "expired") + ": the tombstone of " + subject +
           " ended (its lease is over)" + evidence_text(e.evidence) + waiting_text(e.lock);
  if (run_over(e))
    return paint(style, "32", "expired") + ": " + subject +
           " had ended its run, the lock was kept for --min-hold" + evidence_text(e.evidence) +
           waiting_text(e.lock);
  // After an outage it may not have stopped at all.
  return paint(style, "31", "expired") + ": " + subject +
         (e.evidence == WatchEvent::Evidence::outage ? "" : " stopped renewing") +
         (e.held.count() < 0 ? "" : ", it held the lock " + format_duration(e.held)) +
         evidence_text(e.evidence) + waiting_text(e.lock);
}

// The places of a semaphore or a shared lock: taken, released, expired.
std::string place_event_text(const WatchEvent& e, const OutputStyle& style) {
  using Kind = WatchEvent::Kind;
  std::string subject = who(e.value, e.raw);
  std::string shared = e.shared ? "shared place" : "place";
  if (e.kind == Kind::place_taken)
    return shared + " taken by " + subject + fence_text(e) + until_text(e) + "; " + places_text(e) +
           waiting_text(e.lock);
  if (e.kind == Kind::place_released)
    return shared + " released by " + subject + held_for(e.held) + evidence_text(e.evidence) +
           "; " + places_text(e) + waiting_text(e.lock);
  return paint(style, "31", shared + " expired") + ": " + subject + " stopped renewing" +
         evidence_text(e.evidence) + "; " + places_text(e) + waiting_text(e.lock);
}

std::string watch_text(const WatchEvent& e, WallTime now, const OutputStyle& style) {
  using Kind = WatchEvent::Kind;
  std::string subject = who(e.value, e.raw);
  switch (e.kind) {
  case Kind::state: return state_event_text(e, now, style);
  case Kind::taken:
    return paint(style, "33", "taken") + " by " + subject + fence_text(e) + until_text(e) +
           waiting_text(e.lock);
  case Kind::renewed_late:
    return paint(style, "31", "renewed late") + " by " + subject + ": " + format_duration(e.left) +
           " of its " + format_duration(e.lease) + " ttl left" + renews_text(e);
  case Kind::overdue:
    return paint(style, "31", "overdue") + ": " + subject + " has not renewed, " +
           format_duration(e.ttl) + " of its " + format_duration(e.lease) + " ttl left" +
           renews_text(e) + "; free then unless renewed" + waiting_text(e.lock);
  case Kind::released: return released_text(e, style);
  case Kind::expired: return expired_text(e, style);
  case Kind::broken:
    return paint(style, "31", "broken") + ": " + broken_text(view_holder(*e.value, now), e.ttl) +
           waiting_text(e.lock);
  case Kind::queued:
  case Kind::dequeued:
    return std::string(e.kind == Kind::queued ? "queued" : "dequeued") + ": " +
           std::to_string(e.lock.waiters) + " waiting (was " + std::to_string(e.was_waiters) + ")" +
           first_in_line(e.lock);
  case Kind::place_taken:
  case Kind::place_released:
  case Kind::place_expired: return place_event_text(e, style);
  case Kind::paused: return paint(style, "33", pause_text(e.lock.pause, e.lock.pause_pttl));
  case Kind::resumed:
    return paint(style, "32", "resumed") + ": the pause ended" +
           (e.evidence == WatchEvent::Evidence::ttl ? " (its time was up)" : "") + "; it was " +
           pause_text(e.raw, Millis(-1));
  case Kind::action: return e.run ? result_text(*e.run) : "";
  }
  return "";
}

// One line of watch: JSON, or TEXT after a timestamp.
void print_watch_line(const std::string& json, const std::string& text, WallTime now,
                      const OutputStyle& style) {
  write_stdout(style.json ? json : format_rfc3339(now) + "  " + text + "\n");
}

}  // namespace

void print_watch_start(const std::vector<std::string>& keys, const WatchMode& mode,
                       const OutputStyle& style) {
  if (style.json) {
    write_stdout(watch_start_json(keys, mode, now_wall()));
    return;
  }
  std::string names;
  for (const std::string& k : keys) names += (names.empty() ? "" : ", ") + printable_key(k);
  std::string text = "watching " + names + " by ";
  if (mode.notifications)
    text += "keyspace notifications (notify-keyspace-events \"" + printable(mode.config) + "\")";
  else
    text += "polling every " + format_duration(mode.interval) + " (" + mode.reason + ")";
  write_stdout(text + "\n");
}

void print_watch_event(const WatchEvent& e, const OutputStyle& style) {
  WallTime now = now_wall();
  if (style.json) {
    write_stdout(watch_event_json(e, now));
    return;
  }
  print_watch_line("", printable_key(e.lock.key) + "  " + watch_text(e, now, style), now, style);
}

void print_watch_unreachable(const std::string& message, const OutputStyle& style) {
  WallTime now = now_wall();
  print_watch_line(watch_unreachable_json(message, now),
                   paint(style, "31", "Redis unreachable") + " (" + message + "); retrying", now,
                   style);
}

void print_watch_reachable(Millis down, const OutputStyle& style) {
  WallTime now = now_wall();
  print_watch_line(watch_reachable_json(down, now),
                   "Redis answers again after " + format_duration(down), now, style);
}

}  // namespace rlock
