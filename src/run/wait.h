// Getting the lock under a wait policy: one attempt (--no-wait), or attempts until a deadline
// (--wait D) or for ever (--wait inf), sleeping in between on a wake-up list (BLPOP) that a
// release pushes to, so a waiter gets the lock within a round trip of its release.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <variant>

#include "redis/retry.h"
#include "settings/options.h"
#include "util/clock.h"
#include "util/duration.h"
#include "util/error.h"

namespace rlock {

class Lock;
class SignalEvents;

// Look at the lock again at least this often, even when nothing wakes us: covers a wake-up
// lost with a waiter that died between being woken and taking the lock.
inline constexpr Millis k_max_block{30'000};
// A --fair waiter looks again at least this often, which renews its place in the queue: a
// waiter that died (SIGKILL, a host crash) loses its place within this plus the script's
// margin (1.5 s), so it holds up a free lock for at most 2 s. Costs 2 commands a second per
// fair waiter; other waiters block until they are woken.
inline constexpr Millis k_fair_refresh{500};
// The least time the last attempt of a wait is given for its reply, even past the wait's end.
inline constexpr Millis k_last_attempt_floor{250};

// An outage this long gets a warning (shorter ones only the line when Redis is back).
inline constexpr Millis k_say_unreachable_after{2000};

struct Obtained {
  int64_t fence;
  TimePoint sent;  // when the successful attempt was sent: the lease counts from here
  Millis waited;
  int64_t taken_ms = 0;  // the server's clock when it took the lock (Acquired)
  std::string start;     // the run's start entry in the history (Acquired), or ""
};
struct NotObtained {
  std::string holder_value;  // raw value of the last holder seen
  Millis pttl;
  int64_t sharers = 0;  // the lock was shared by this many holders (--shared); 0: held alone
  bool paused = false;  // rlock pause: HOLDER_VALUE is the pause's text, PTTL its time left
};
struct Interrupted {
  int signo;
};
struct NotALock {
  std::string type;
};
using WaitOutcome = std::variant<Obtained, NotObtained, Interrupted, NotALock, Failure>;

// Sleeps until UNTIL; returns the signal (one that ends a process) that cut the sleep short.
std::optional<int> sleep_interruptible(TimePoint until, SignalEvents& signals);

// OPTIONS' jitter (--jitter) on KEY: a random pause in [0, jitter) before the first try, so
// that a herd's hosts draw apart. The signal read from SIGNALS that cut it short, if one did.
std::optional<int> jitter_pause(const std::string& key, const RunOptions& options,
                                SignalEvents& signals);

// Takes LOCK with VALUE, for OPTIONS' ttl. Their wait: nullopt for a single attempt;
// Millis::max() for no limit. Within it a failure that worth_retrying() is tried again with
// backoff. A forwarded signal read from SIGNALS ends the wait as Interrupted. After a failed or
// interrupted wait nothing of ours is left in Redis (a lost reply to a successful attempt is
// undone with a release, and we leave the queue). STILL_WANTED, when given, is asked after
// each wait for a wake-up, before the next attempt: false ends the wait (NotObtained) without
// taking the lock, as when a --once-per waiter's period had its run meanwhile.
WaitOutcome acquire(Lock& lock, const std::string& value, const RunOptions& options,
                    SignalEvents& signals, const std::function<bool()>& still_wanted = {});

}  // namespace rlock
