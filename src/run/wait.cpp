#include "run/wait.h"

#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <random>

#include "lock/lock.h"
#include "lock/pause.h"
#include "print/print.h"
#include "process/signals.h"
#include "process/terminal.h"
#include "util/log.h"

namespace rlock {

namespace {

// BLPOP's timeout in seconds, with millisecond precision (Redis 6 and later).
std::string blpop_seconds(Millis d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f",
                static_cast<double>(std::max(d, Millis(1)).count()) / 1000);
  return buf;
}

class Waiter {
public:
  Waiter(Lock& lock, SignalEvents& signals, std::optional<Millis> wait,
         const std::function<bool()>& still_wanted)
      : lock_(lock), signals_(signals), still_wanted_(still_wanted), start_(Clock::now()) {
    if (!wait)
      give_up_ = start_;
    else if (*wait != Millis::max())
      give_up_ = start_ + *wait;
  }

  WaitOutcome run(const std::string& value, Millis ttl) {
    for (;;) {
      TimePoint sent = Clock::now();
      auto attempt = lock_.try_acquire(value, ttl, plan(sent), attempt_deadline(sent));
      if (attempt) {
        reached_ = true;
        // One line for the whole outage, as for its end when the wait runs out first.
        if (last_failure_)
          log(Level::info, {"redis_back", lock_.key(),
                            "Redis answers again after " + format_duration(since_failing()) + " (" +
                                last_failure_->message + ")"});
        last_failure_.reset();
        may_hold_ = false;  // an answer: a lock taken by a lost reply would have been ours now
        if (auto* got = std::get_if<Acquired>(&*attempt)) {
          status_.clear();
          return Obtained{got->fence, sent, std::chrono::duration_cast<Millis>(sent - start_),
                          got->taken_ms, got->start};
        }
        if (auto* wrong = std::get_if<WrongType>(&*attempt)) return NotALock{wrong->type};
        busy_ = std::get<Busy>(*attempt);
        busy_seen_ = Clock::now();
        NotObtained busy{busy_.value, busy_.pttl, busy_.sharers, busy_.paused};
        if (out_of_time()) return give_up(busy);
        auto sig = lock_.redis().node_count() > 1 ? pause() : block(busy_.block);
        if (sig) return give_up(Interrupted{*sig});
        if (still_wanted_ && !still_wanted_()) return give_up(busy);
      } else {
        if (auto out = retry_or_give_up(attempt.failure())) return *out;
      }
    }
  }

private:
  // The longest the script may tell us to block: k_max_block, or the time left to wait.
  std::optional<WaitPlan> plan(TimePoint now) const {
    if (give_up_ && *give_up_ <= now) return std::nullopt;  // one attempt: do not queue
    Millis max_block = lock_.mode().fair ? k_fair_refresh : k_max_block;
    if (give_up_) max_block = std::min(max_block, std::chrono::ceil<Millis>(*give_up_ - now));
    return WaitPlan{max_block, k_wake_fallback};
  }

  bool out_of_time() const { return give_up_ && Clock::now() >= *give_up_; }

  // An attempt waits for its reply up to the command timeout, but not past the end of the
  // wait: a server that accepts and never answers must not stretch --wait 2s to 5. The last
  // attempt still gets a floor, lest a merely slow reply be lost; --no-wait's only attempt
  // gets the whole command timeout, as any other command.
  TimePoint attempt_deadline(TimePoint sent) const {
    TimePoint deadline = sent + lock_.command_timeout();
    if (!give_up_ || *give_up_ == start_) return deadline;
    return std::min(deadline, std::max(*give_up_, sent + std::min(lock_.command_timeout(),
                                                                  k_last_attempt_floor)));
  }

  // After a failed attempt: the outcome when it is the last, else nothing once the pause
  // before the next attempt is over. A failure that may pass is retried until the wait ends
  // (a first attempt too: a deploy hook's --wait outlasts a Redis restart); one that will not
  // ends the wait now, as does the first of any with --no-wait.
  std::optional<WaitOutcome> retry_or_give_up(const Failure& failure) {
    if (failure.kind != Failure::Kind::connect) reached_ = true;
    if (may_have_run(failure)) may_hold_ = true;
    // A connection dropped under the attempt gets one more at once on a new connection,
    // --no-wait's too: an acquisition that did run is found by its token (acquire.lua).
    if (dropped(failure) && !resent_dropped_) {
      resent_dropped_ = true;
      return std::nullopt;
    }
    bool first = !last_failure_;
    if (first) {
      failing_since_ = Clock::now();
      said_unreachable_ = false;
    }
    if (!worth_retrying(failure) || out_of_time()) {
      last_failure_ = failure;
      if (!first && worth_retrying(failure))
        last_failure_->message += " (retried for " + format_duration(since_failing()) + ")";
      return give_up(*last_failure_);
    }
    if (first) backoff_.reset();
    bool stepping = !backoff_.at_cap();
    Millis pause = backoff_.next();
    if (first) {
      std::string until =
          give_up_
              ? " for up to " + format_duration(std::chrono::ceil<Millis>(*give_up_ - Clock::now()))
              : "";
      log(Level::debug, {"redis_retry", lock_.key(), failure.message + "; retrying" + until});
    } else if (stepping || failure.message != last_failure_->message) {
      // -v: once a step (and when the error changes), not once an attempt.
      log(Level::debug, {"redis_retry", lock_.key(),
                         failure.message + "; retrying in " + format_duration(pause)});
    }
    if (!said_unreachable_ && since_failing() >= k_say_unreachable_after) {
      // A wait that may be long (--wait inf, a typo in the port) is not silent for ever; a
      // blip shorter than this costs no line beyond "Redis answers again".
      said_unreachable_ = true;
      log(Level::warning,
          {"redis_retry", lock_.key(), failure.message + "; retrying until the wait ends"});
    }
    last_failure_ = failure;
    if (status_.enabled())
      status_.draw("rlock: waiting for " + lock_.key() + ": Redis unreachable, retrying: " +
                   failure.message + "; waited " + format_duration(waited()));
    TimePoint next = Clock::now() + pause;
    if (give_up_) next = std::min(next, *give_up_);
    if (auto sig = sleep_interruptible(next, signals_)) return give_up(Interrupted{*sig});
    return std::nullopt;
  }

  Millis waited() const { return std::chrono::duration_cast<Millis>(Clock::now() - start_); }
  Millis since_failing() const {
    return std::chrono::duration_cast<Millis>(Clock::now() - failing_since_);
  }

  // Blocks on our wake-up list for up to FOR_HOW_LONG, redrawing the status line every second
  // on a terminal. Returns a forwarded signal that arrived meanwhile.
  std::optional<int> block(Millis for_how_long) {
    TimePoint until = Clock::now() + for_how_long;
    for (;;) {
      draw_status();
      TimePoint now = Clock::now();
      if (now >= until) return std::nullopt;
      Millis slice = std::chrono::ceil<Millis>(until - now);
      if (status_.enabled()) slice = std::min(slice, Millis(1000));
      auto popped =
          lock_.redis().blocking_call({"BLPOP", lock_.wake_key(), blpop_seconds(slice)},
                                      now + slice + lock_.command_timeout(), signals_.fd());
      if (popped && popped->is_array()) return std::nullopt;  // woken: try now
      if (!popped && popped.failure().kind == Failure::Kind::interrupted) {
        if (auto sig = signals_.next_request_to_stop()) return sig;
        continue;
      }
      if (!popped) return std::nullopt;  // the next attempt will say what is wrong
    }
  }

  // Redlock: no node can wake us (each would wake its own first waiter, and they disagree),
  // so look again after a random 50 to 250 ms, as redsync does: waiters that collided do not
  // collide again in step.
  std::optional<int> pause() {
    draw_status();
    std::uniform_int_distribution<int> jitter(50, 250);
    TimePoint next = Clock::now() + Millis(jitter(random_));
    if (give_up_) next = std::min(next, *give_up_);
    return sleep_interruptible(next, signals_);
  }

  void draw_status() {
    if (!status_.enabled()) return;
    Millis since_seen = std::chrono::duration_cast<Millis>(Clock::now() - busy_seen_);
    Millis pttl =
        busy_.pttl.count() >= 0 ? std::max(Millis(0), busy_.pttl - since_seen) : busy_.pttl;
    std::string holder = busy_.paused ? pause_text(busy_.value, pttl)
                         : !busy_.value.empty()
                             ? "held by " + describe_holders(busy_.value, pttl, busy_.sharers)
                         : lock_.mode().shared ? "waiting behind a request for the lock alone"
                                               : "free, waiting for our turn";
    status_.draw("rlock: waiting for " + lock_.key() + ": " + holder + "; waited " +
                 format_duration(waited()));
  }

  // Leaves the queue (and undoes a possibly successful attempt) before reporting OUTCOME;
  // nothing to do when no attempt ever reached Redis.
  WaitOutcome give_up(WaitOutcome outcome) {
    status_.clear();
    if (!reached_) return outcome;
    // Best effort, within one command timeout for both: an attempt whose reply was lost (not
    // only the last) may have taken it, and a server that did not answer the release will not
    // answer the next command either.
    TimePoint deadline = Clock::now() + lock_.command_timeout();
    if (may_hold_) {
      auto released = lock_.release(deadline);
      if (!released && released.failure().kind == Failure::Kind::timeout) return outcome;
    }
    if (give_up_ != start_) (void)lock_.leave_queue(deadline);
    return outcome;
  }

  Lock& lock_;
  SignalEvents& signals_;
  const std::function<bool()>& still_wanted_;
  TimePoint start_;
  std::optional<TimePoint> give_up_;  // nullopt: for ever
  bool reached_ = false;  // an attempt may have run in Redis: there may be something to undo
  std::optional<Failure> last_failure_;  // of the attempts since Redis last answered
  bool resent_dropped_ = false;          // the one attempt sent again at once, after dropped()
  bool may_hold_ = false;                // one of those may have taken the lock (may_have_run())
  Backoff backoff_;
  TimePoint failing_since_{};      // the first failed attempt since Redis last answered
  bool said_unreachable_ = false;  // the warning of a long outage was given
  Busy busy_{};
  TimePoint busy_seen_{};
  StatusLine status_;
  std::minstd_rand random_{static_cast<unsigned>(::getpid()) ^
                           static_cast<unsigned>(Clock::now().time_since_epoch().count())};
};

}  // namespace

std::optional<int> jitter_pause(const std::string& key, const RunOptions& options,
                                SignalEvents& signals) {
  const auto& jitter = options.jitter;
  if (!jitter) return std::nullopt;
  // Seeded like Backoff: hosts whose cron fires in the same second draw apart.
  std::minstd_rand random(static_cast<unsigned>(::getpid()) ^
                          static_cast<unsigned>(Clock::now().time_since_epoch().count()));
  std::uniform_int_distribution<int64_t> pause(0, jitter->count() - 1);
  Millis drawn(pause(random));
  log(Level::debug,
      {"jitter", key,
       "first try in " + format_duration(drawn) + " (--jitter " + format_duration(*jitter) + ")"});
  return sleep_interruptible(Clock::now() + drawn, signals);
}

std::optional<int> sleep_interruptible(TimePoint until, SignalEvents& signals) {
  for (;;) {
    if (auto sig = signals.next_request_to_stop()) return sig;
    int timeout = millis_until(until);
    if (timeout == 0) return std::nullopt;
    pollfd p{signals.fd(), POLLIN, 0};
    ::poll(&p, 1, timeout);
  }
}

WaitOutcome acquire(Lock& lock, const std::string& value, const RunOptions& options,
                    SignalEvents& signals, const std::function<bool()>& still_wanted) {
  return Waiter(lock, signals, options.wait, still_wanted).run(value, options.ttl);
}

}  // namespace rlock
