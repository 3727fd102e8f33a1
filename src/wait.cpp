#include "wait.h"

#include <poll.h>

#include <random>

#include "lock.h"
#include "log.h"
#include "signals.h"

namespace rlock {

namespace {

bool is_forwarded(int sig) {
  for (int s : k_forwarded_signals)
    if (s == sig) return true;
  return false;
}

// Sleeps until UNTIL; returns the signal that cut the sleep short, if any.
std::optional<int> sleep_interruptible(TimePoint until, SignalEvents& signals) {
  for (;;) {
    while (auto sig = signals.next())
      if (is_forwarded(*sig)) return sig;
    int timeout = millis_until(until);
    if (timeout == 0) return std::nullopt;
    pollfd p{signals.fd(), POLLIN, 0};
    ::poll(&p, 1, timeout);
  }
}

// Best effort after giving up: an attempt whose reply we lost may have taken the lock. Nothing
// to undo when the failure was that no connection could be made.
void undo_possible_acquire(Lock& lock, const Failure& failure) {
  if (failure.kind != Failure::Kind::connect && failure.kind != Failure::Kind::server)
    (void)lock.release(Clock::now() + lock.command_timeout());
}

}  // namespace

WaitOutcome acquire(Lock& lock, const std::string& value, Millis ttl, std::optional<Millis> wait,
                    SignalEvents& signals) {
  TimePoint start = Clock::now();
  std::optional<TimePoint> give_up;  // nullopt: for ever
  if (!wait)
    give_up = start;
  else if (*wait != Millis::max())
    give_up = start + *wait;
  std::minstd_rand jitter(std::random_device{}());
  std::optional<Failure> last_failure;
  bool ever_answered = false;
  for (;;) {
    TimePoint sent = Clock::now();
    auto attempt = lock.try_acquire(value, ttl, sent + lock.command_timeout());
    std::optional<Millis> holder_pttl;
    std::string holder_value;
    if (attempt) {
      ever_answered = true;
      if (last_failure) log_info(lock.key() + ": Redis answers again");
      last_failure.reset();
      if (auto* got = std::get_if<Acquired>(&*attempt))
        return Obtained{got->fence, sent, std::chrono::duration_cast<Millis>(sent - start)};
      if (auto* wrong = std::get_if<WrongType>(&*attempt)) return NotALock{wrong->type};
      auto& busy = std::get<Busy>(*attempt);
      holder_pttl = busy.pttl;
      holder_value = busy.value;
    } else {
      // Unreachable on the first try: fail now (exit 69) rather than wait on a Redis that may
      // never come. Once it has answered, a blip during a long wait is retried.
      if (!ever_answered || attempt.failure().kind == Failure::Kind::server) {
        undo_possible_acquire(lock, attempt.failure());
        return attempt.failure();
      }
      if (!last_failure) log_warning(lock.key() + ": " + attempt.failure().message + "; retrying");
      last_failure = attempt.failure();
    }

    TimePoint now = Clock::now();
    if (give_up && now >= *give_up) {
      if (last_failure) {
        undo_possible_acquire(lock, *last_failure);
        return *last_failure;
      }
      return NotObtained{holder_value, holder_pttl.value_or(Millis(-1))};
    }
    // 50-150% of the poll interval so that many waiters spread out, but never past the holder's
    // expiry (a holder that died is replaced at once) or our own deadline.
    auto spread = std::uniform_int_distribution<int64_t>(k_poll_interval.count() / 2,
                                                         k_poll_interval.count() * 3 / 2);
    TimePoint next = now + Millis(spread(jitter));
    if (holder_pttl && holder_pttl->count() >= 0)
      next = std::min(next, now + *holder_pttl + Millis(1));
    if (give_up) next = std::min(next, *give_up);
    if (auto sig = sleep_interruptible(next, signals)) {
      if (last_failure) undo_possible_acquire(lock, *last_failure);
      return Interrupted{*sig};
    }
  }
}

}  // namespace rlock
