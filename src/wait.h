// Getting the lock under a wait policy: one attempt (--no-wait), or attempts until a deadline
// (--wait D) or for ever (--wait inf). The only place that decides when to try again.
#pragma once

#include <optional>
#include <string>
#include <variant>

#include "clock.h"
#include "duration.h"
#include "error.h"

namespace rlock {

class Lock;
class SignalEvents;

// Between attempts while the holder is alive. Peers poll at 50-250 ms; a notification-based
// wait replaces this loop later (it is kept in this one function for that).
inline constexpr Millis k_poll_interval{100};

struct Obtained {
  int64_t fence;
  TimePoint sent;  // when the successful attempt was sent: the lease counts from here
  Millis waited;
};
struct NotObtained {
  std::string holder_value;  // raw value of the last holder seen
  Millis pttl;
};
struct Interrupted {
  int signo;
};
struct NotALock {
  std::string type;
};
using WaitOutcome = std::variant<Obtained, NotObtained, Interrupted, NotALock, Failure>;

// WAIT: nullopt for a single attempt; Millis::max() for no limit. A forwarded signal read from
// SIGNALS ends the wait as Interrupted. After a failed or interrupted wait nothing of ours is
// left in Redis (a lost reply to a successful attempt is undone with a release).
WaitOutcome acquire(Lock& lock, const std::string& value, Millis ttl, std::optional<Millis> wait,
                    SignalEvents& signals);

}  // namespace rlock
