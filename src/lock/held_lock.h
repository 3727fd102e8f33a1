// A lock this process holds (rlock run): given back when the HeldLock goes out of scope, on
// every way out of the run (an early return, an exception), unless it was given back, kept
// for --min-hold or found lost before. The end of a run hands it over explicitly (release,
// give_back, forget), with the run's history entry riding the release's round trip.
#pragma once

#include <optional>

#include "lock/lock.h"
#include "util/clock.h"
#include "util/duration.h"

namespace rlock {

// Time allowed to give the lock back at the end, across retries (a Redis restart, a failover).
inline constexpr Millis k_release_budget{5000};

class HeldLock {
public:
  // LOCK, taken with TTL by the acquisition sent at ACQUIRED.
  HeldLock(Lock& lock, Millis ttl, TimePoint acquired)
      : lock_(lock), ttl_(ttl), acquired_(acquired) {}
  ~HeldLock();
  HeldLock(const HeldLock&) = delete;
  HeldLock& operator=(const HeldLock&) = delete;

  Lock& lock() { return lock_; }
  TimePoint acquired() const { return acquired_; }

  // Gives the lock back, retrying through a Redis blip (a connection closed under it, a
  // restart refusing connections, a failover) for up to BUDGET (at most the ttl); a lock we
  // cannot release expires by itself within the ttl, and rlock says so. HISTORY, the run's
  // history entry, rides in the release's round trip (after the release: it delays no one)
  // and is cleared once Redis answered it. Both are sent again until answered: each is applied
  // once however often it arrives (Lock::release, history_entry). False when Redis could not
  // be reached.
  bool release(std::optional<ScriptCall>* history = nullptr, Millis budget = k_release_budget);
  // After the command ended normally: release(), or keep the lock until MIN_HOLD after the
  // acquisition (it then expires by itself). False when Redis could not be reached.
  bool give_back(std::optional<Millis> min_hold, std::optional<ScriptCall>* history, Millis budget);
  // Someone else gives it back (the script that told acquire --while-pid's keeper it will).
  void hand_over() { done_ = true; }
  // FORGET (history_forget()) removes the run's start entry from the history: a release that
  // carries no entry of the run's end (the command never started) sends it along.
  void forget_start(ScriptCall forget) { forget_ = std::move(forget); }
  // After the lock was lost (found not ours, or its lease ran out): a release that finds it
  // gone or another's is no news then, but one that finds it still ours (Redis was away and
  // is back in time) spares the next holder the wait for the expiry, and a tombstone that
  // `release --force` left for us waits until our command has stopped, which it now has. The
  // release script ends it (and HISTORY rides along, as with release()); nothing else changes.
  bool release_lost(std::optional<ScriptCall>* history, Millis budget) {
    lost_ = true;
    return release(history, budget);
  }

private:
  Lock& lock_;
  const Millis ttl_;
  const TimePoint acquired_;
  bool done_ = false;  // given back, kept for --min-hold, or lost: the destructor leaves it
  bool lost_ = false;  // known lost: a release that finds it not ours is no news
  std::optional<ScriptCall> forget_;  // see forget_start()
};

// A history entry that could not be written: one warning, never the job's failure.
void warn_history(const std::string& key, const std::string& why);
// Sends ENTRY (history_entry()) on a round trip of its own, again after a closed connection,
// within BUDGET (default: a command timeout); a failure is one warning. False when it was surely
// not recorded (true also when Redis may run it yet: a frozen server runs it when it wakes).
bool send_history(Redis& redis, const std::string& key, const ScriptCall& entry,
                  std::optional<Millis> budget = std::nullopt);

}  // namespace rlock
