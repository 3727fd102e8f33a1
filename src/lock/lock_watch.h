// rlock watch: what changed between two looks at a lock (LockState, lock_state.h), told as the
// events an operator reads: taken, renewed late, released, expired, broken, waiters queued ...
// Pure: the verb (verbs/watch.cpp) reads the states and listens for keyspace notifications;
// this decides what they mean.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lock/lock_state.h"
#include "util/clock.h"
#include "util/duration.h"

namespace rlock {

// How often `rlock watch` reads the locks when the server sends no keyspace notifications.
inline constexpr Millis k_watch_poll_interval{250};
// With notifications, the locks are read again this often all the same: a message lost (a
// reconnect, a client output buffer limit) cannot hide a change for longer.
inline constexpr Millis k_watch_reread_interval{5000};
// How much the round trips of two reads blur the time between them. A holder or a place gone
// no later than this before its ttl said it would end expired, and was not deleted; a ttl
// longer by more than this than the last look implies was renewed.
inline constexpr Millis k_timing_margin{50};

// rlock renews every ttl/3, with two thirds of the ttl left. A renewal is late when less than
// half the ttl was left: more than ttl/6 after it was due, which one failed attempt (retried
// after ttl/30) does not make, and a renewal missed or a holder frozen does.
constexpr bool renewal_late(Millis left, Millis ttl) { return left < ttl / 2; }

// How `rlock watch` learns of changes, as its first line says.
struct WatchMode {
  bool notifications = false;  // keyspace notifications; else polling
  std::string config;          // notify-keyspace-events, as CONFIG GET gave it ("" unknown)
  std::string reason;          // why polling: "keyspace notifications are off on this server" ...
  Millis interval{0};          // polling: every; notifications: the safety re-read
};

// The classes of notify-keyspace-events a watch needs, that CONFIG_VALUE lacks: K (keyspace
// channels, which are per key; keyevent channels, E, are per event and would bring every
// such event of the server to filter), g (del, expire), $ (set), x (expired) and z (the
// queue's and the places' zadd and zrem). 'A' stands for "g$lshzxetd". "" when none.
std::string missing_classes(const std::string& config_value);

// The hint look() gets for the first look after Redis was unreachable.
inline constexpr const char* k_outage_hint = "outage";

struct WatchEvent {
  enum class Kind {
    state,         // the first look: how the lock is (also when it becomes or stops being
                   // a key of another type)
    taken,         // by an rlock holder, or by another client (a plain string)
    renewed_late,  // renewed with less than half its ttl left
    overdue,       // not renewed though half its ttl has passed: free at its end unless renewed
    released,      // deleted by its holder (for a tombstone: the broken holder has stopped)
    expired,       // its ttl ran out: the holder stopped renewing (or a tombstone ended)
    broken,        // release --force left a tombstone in the holder's place
    queued,        // more rlock processes wait for it
    dequeued,      // fewer: one was served, or gave up
    place_taken,   // a place of a semaphore (--limit) or of a shared lock (--shared)
    place_released,
    place_expired,
    paused,   // rlock pause (pause.h): nobody takes it until the pause ends; or a new pause
    resumed,  // the pause ended: rlock resume (an action follows), or its time was up (ttl
              // evidence)
    action,   // an operator's action in the history (run): a resume, a reset of the period, a
              // forced release with --now; a pause or a break only when no paused or broken
              // event told it (a pause that came and went between two looks)
  };
  // What says whether a holder (or a place) was released or expired.
  enum class Evidence {
    none,          // not such an event
    notification,  // the server's keyspace event: del, or expired
    history,       // its run's entry in the lock's history, which `rlock run` writes as it
                   // ends (also the only trace of a run that came and went between two looks)
    ttl,           // the time it had left at the last look: gone before it ran out, released
    outage,        // gone while Redis was unreachable: expired, or lost in a restart; its
                   // holder may still run
  };

  Kind kind = Kind::state;
  LockState lock;  // the lock as it is now
  // Whom the event is about: the holder now (state, taken, broken, renewed_late, overdue), the
  // holder that went (released, expired), or a place (place_*), with its ttl then.
  std::string raw;
  std::optional<LockValue> value;
  Millis ttl{-2};   // -1: no expiry; -2: none
  Millis lease{0};  // the ttl its holder sets (seen right after it took or renewed it); 0: unknown
  Millis left{0};   // renewed_late: how much of the ttl was left when it was renewed
  // released, expired: how long it held the lock, from the look that saw it taken (or its
  // run's history entry); -1: not known (it was taken before the watch began)
  Millis held{-1};
  Evidence evidence = Evidence::none;
  // released, expired (and a taken no look saw): its run's history entry, once it is there;
  // action: the operator's entry
  std::optional<RunRecord> run;
  bool shared = false;      // place_*: a place of a shared lock, not of a semaphore
  int64_t was_waiters = 0;  // queued, dequeued: how many waited before
};

// The first live waiter of LOCK's queue, in arrival order (the one woken first; with --fair,
// served first): its token, or "" when none waits.
std::string first_waiter(const LockState& lock);

// One watched lock: what was seen at the last look, and the events each new look makes.
class LockWatch {
public:
  // The events between the last look and NOW, read at AT (the steady clock, when the reply
  // came). HINTS: the keyspace events of the lock key seen since the last look ("del",
  // "expired", "set" ...), in order; none when polling. RUNS: the entries of the lock's
  // history added since the last look, oldest first, up to NOW's last_run (read_new_runs());
  // without them, NOW's last_run is the only run known. The first look gives its state.
  std::vector<WatchEvent> look(const LockState& now, TimePoint at,
                               const std::vector<std::string>& hints,
                               const std::vector<RunRecord>& runs = {});
  // When to look again although nothing was heard: when a held lock's renewal becomes
  // overdue, or a place of a semaphore or of a shared lock lapses (Redis sends no event for
  // either). Nothing when no such time is ahead.
  std::optional<TimePoint> due() const;

private:
  struct Look;
  // The history entry of the run that holds (or held) a lock or a place with VALUE.
  std::optional<RunRecord> run_of(const Look& l, const std::optional<LockValue>& value) const;
  // An event about the lock's holder now, added to the look's; the caller changes what differs.
  WatchEvent& event(Look& l, WatchEvent::Kind kind) const;
  // The event of the holder (or, PLACE, a place) with VALUE, RAW and TTL at the last look,
  // SINCE ago, and gone now: expired or released, with what says which, and its run.
  WatchEvent& gone(Look& l, bool place, const std::string& raw,
                   const std::optional<LockValue>& value, Millis ttl, Millis since);
  // What became of the holder since LAST, SINCE ago: released, expired, taken, broken,
  // renewed late, overdue.
  void look_at_holder(Look& l, const LockState& last, Millis since);
  // A pause that ended since LAST, SINCE ago: resumed, or its time was up.
  void look_at_resume(Look& l, const LockState& last, Millis since);
  // The places of a semaphore or a shared lock taken or given up since LAST.
  void look_at_places(Look& l, const LockState& last, Millis since);
  // The runs of RUNS that no look saw: each took the lock and gave it back between two looks.
  // Adds their events to OUT, in the order they ran.
  void ran_unseen(const LockState& last, const LockState& now, const std::vector<RunRecord>& runs,
                  std::vector<WatchEvent>& out);
  void saw_fence(const std::optional<LockValue>& value);
  // Whether ACTION, an operator's history entry, tells only what an event said already: a
  // pause's text and a tombstone name who and why themselves.
  bool told_already(const RunRecord& action) const;

  std::optional<LockState> last_;
  TimePoint last_at_{};
  std::optional<TimePoint> taken_at_;  // the look that saw the holder now take the lock
  std::vector<int64_t> fences_;        // of the holders and places seen lately, newest last
  Millis lease_{0};  // the holder's ttl, seen when it took or renewed the lock; 0: unknown
  bool said_overdue_ = false;  // for the holder's current lease
  // The history entry of the holder seen at the last look, when its run has ended (the lock
  // kept for --min-hold): a later run's entry may be the newest when the lock goes.
  std::optional<RunRecord> holder_run_;
  std::string pause_told_;            // the pause the last paused event told (its text)
  std::vector<int64_t> broken_told_;  // the fences of the holders broken events told, a few
};

}  // namespace rlock
