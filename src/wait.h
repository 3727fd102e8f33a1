// Getting the lock under a wait policy: one attempt (--no-wait), or attempts until a deadline
// (--wait D) or for ever (--wait inf), sleeping in between on a wake-up list (BLPOP) that a
// release pushes to, so a waiter gets the lock within a round trip of its release.
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

// Look at the lock again at least this often, even when nothing wakes us: covers a wake-up
// lost with a waiter that died between being woken and taking the lock.
inline constexpr Millis k_max_block{30'000};
// A --fair waiter looks again at least this often, which renews its place in the queue: a
// waiter that died (SIGKILL, a host crash) loses its place within this plus the script's
// margin (1.5 s), so it holds up a free lock for at most 2 s. Costs 2 commands a second per
// fair waiter; other waiters block until they are woken.
inline constexpr Millis k_fair_refresh{500};
// After a failed attempt (Redis unreachable), wait this long before the next.
inline constexpr Millis k_retry_interval{200};
// A waiter (--wait) whose Redis cannot be reached tries again after a pause that starts here
// and doubles up to the cap, each with jitter: a restart of a few seconds costs it little
// more, and a fleet of waiters does not come back at the same instant.
inline constexpr Millis k_backoff_first{50};
// The least time the last attempt of a wait is given for its reply, even past the wait's end.
inline constexpr Millis k_last_attempt_floor{250};
inline constexpr Millis k_backoff_cap{2000};

// Those pauses: each is half the step plus up to as much again at random ("equal jitter"),
// and the step doubles after each, up to the cap.
class Backoff {
public:
  Backoff();
  Millis next();
  void reset() { step_ = k_backoff_first; }
  bool at_cap() const { return step_ >= k_backoff_cap; }

private:
  Millis step_ = k_backoff_first;
  unsigned random_state_;  // a std::minstd_rand's; <random> stays out of this header
};
// An outage this long gets a warning (shorter ones only the line when Redis is back).
inline constexpr Millis k_say_unreachable_after{2000};

// Whether commands that failed so may have run in Redis all the same: their reply was lost
// (a timeout, a connection cut). Not when no connection could be made, or the server refused.
bool may_have_run(const Failure& failure);

// Whether FAILURE is a connection closed or reset under the command (a proxy's idle timeout, a
// rotated credential, CLIENT KILL): the command may or may not have run, and a new connection
// is likely to work at once.
bool dropped(const Failure& failure);

// The tries of an operation that may be sent again (applied once however often it arrives: a
// release, a history entry, the end of a period's run) until it is answered or GIVE_UP.
class Resend {
public:
  explicit Resend(TimePoint give_up) : give_up_(give_up) {}
  TimePoint give_up() const { return give_up_; }
  // Whether to send it again after FAILURE, having paused: not once Redis refused the
  // connection or answered with an error, nor past GIVE_UP. A connection dropped under the
  // first try (dropped()) is tried again at once on a new one; later tries wait
  // k_retry_interval.
  bool again(const Failure& failure);

private:
  TimePoint give_up_;
  bool first_ = true;
};

// SEND() (a Result), sent again as Resend allows until it is answered or GIVE_UP.
template <class Send> auto resend_until(TimePoint give_up, Send send) -> decltype(send()) {
  Resend tries(give_up);
  auto result = send();
  while (!result && tries.again(result.failure())) result = send();
  return result;
}

// Whether FAILURE may pass by itself, so that a waiter should try again: Redis cannot be
// reached, or is not ready (loading its data, a failover, a Cluster or Sentinel catching up).
// A refusal that trying again will not change (a password, an ACL, TLS material, a key of
// another type, out of memory) is false.
bool worth_retrying(const Failure& failure);

struct Obtained {
  int64_t fence;
  TimePoint sent;  // when the successful attempt was sent: the lease counts from here
  Millis waited;
};
struct NotObtained {
  std::string holder_value;  // raw value of the last holder seen
  Millis pttl;
  int64_t sharers = 0;  // the lock was shared by this many holders (--shared); 0: held alone
};
struct Interrupted {
  int signo;
};
struct NotALock {
  std::string type;
};
using WaitOutcome = std::variant<Obtained, NotObtained, Interrupted, NotALock, Failure>;

// WAIT: nullopt for a single attempt; Millis::max() for no limit. Within WAIT a failure that
// worth_retrying() is tried again with backoff. A forwarded signal read from SIGNALS ends the
// wait as Interrupted. After a failed or interrupted wait nothing of ours is
// left in Redis (a lost reply to a successful attempt is undone with a release, and we leave
// the queue).
WaitOutcome acquire(Lock& lock, const std::string& value, Millis ttl, std::optional<Millis> wait,
                    SignalEvents& signals);

}  // namespace rlock
