// Trying Redis again after a failure: whether the failure may pass, whether what was sent may
// have run all the same, the waiter's backoff, and sending again what may be sent again (an
// end of run: docs/DESIGN.md "An end that can be sent again").
#pragma once

#include "util/clock.h"
#include "util/duration.h"
#include "util/error.h"

namespace rlock {

// After a failed attempt (Redis unreachable), wait this long before the next.
inline constexpr Millis k_retry_interval{200};
// A waiter (--wait) whose Redis cannot be reached tries again after a pause that starts here
// and doubles up to the cap, each with jitter: a restart of a few seconds costs it little
// more, and a fleet of waiters does not come back at the same instant.
inline constexpr Millis k_backoff_first{50};
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

// Whether FAILURE may pass by itself, so that a waiter should try again: Redis cannot be
// reached, or is not ready (loading its data, a failover, a Cluster or Sentinel catching up).
// A refusal that trying again will not change (a password, an ACL, TLS material, a key of
// another type, out of memory), and rlock's own process out of descriptors, processes or
// memory, are false.
bool worth_retrying(const Failure& failure);

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
  // Whether to send it again after FAILURE, having paused: when what was sent may have run
  // (its reply lost) or the failure may pass (worth_retrying: a restart refusing connections,
  // a failover), not once Redis answered with a refusal that stays, nor past GIVE_UP. A
  // connection dropped under the first try (dropped()) is tried again at once on a new one;
  // later tries wait k_retry_interval.
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

}  // namespace rlock
