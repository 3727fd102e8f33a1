// The lease owns time: when to renew, and from when the lock can no longer be trusted.
// The arithmetic is pure and unit-tested; Renewals runs it on a thread of its own so that a
// slow or dead Redis never delays rlock's reaction to signals or to the child.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "lock/run_phase.h"
#include "util/clock.h"
#include "util/duration.h"
#include "util/fd.h"

namespace rlock {

class Lock;
struct PhaseUpdate;

// How much earlier than Redis we consider the lock gone: clock-rate differences between us and
// the server, and the time a PEXPIRE takes to land: ttl/100 + 2 ms (rlock-run(1) "Lease safety").
constexpr Millis lease_drift(Millis ttl) { return ttl / 100 + Millis(2); }

// The lock is ours until this point, counted from when the command that set its TTL was sent
// (not when its reply came: the server may have run it at once).
constexpr TimePoint lease_deadline(TimePoint sent, Millis ttl) {
  return sent + ttl - lease_drift(ttl);
}

constexpr Millis renew_interval(Millis ttl) { return ttl / 3; }

// After a failed renewal, try again this soon; several tries fit in every lease.
constexpr Millis renew_retry_interval(Millis ttl) {
  return std::min(std::max(ttl / 30, Millis(10)), Millis(1000));
}

// How long one renewal may wait for its reply before it is retried on a new connection.
constexpr Millis renew_attempt_timeout(Millis ttl) {
  return std::min(std::max(ttl / 6, Millis(50)), Millis(2000));
}

// 5 s, or ttl/3 when that is shorter (rlock-run(1), --kill-after).
constexpr Millis default_kill_after(Millis ttl) { return std::min(Millis(5000), ttl / 3); }

// A --kill-after at or above ttl/2 leaves too little of the lease to renew in.
constexpr bool kill_after_allowed(Millis kill_after, Millis ttl) { return kill_after < ttl / 2; }

// The longest outage (Redis unreachable, a failover) a holder rides through whatever its phase:
// one that begins just before a renewal is due, ttl/3 after the last one, must be over, and the
// next retry answered, before the kill signal is due (KILL_AFTER before the lease's end). A
// server that vanished without a reset (a host gone, not a process) may hold an attempt for its
// timeout as well (renew_attempt_timeout). rlock doctor compares it with a topology's failover
// window (docs/DESIGN.md "Failover windows").
constexpr Millis outage_ridden(Millis ttl, Millis kill_after) {
  Millis left =
      ttl - renew_interval(ttl) - lease_drift(ttl) - kill_after - renew_retry_interval(ttl);
  return std::max(left, Millis(0));
}

// The shortest ttl, in whole seconds, whose outage_ridden() covers WINDOW, with KILL_AFTER or,
// without one, the default kill-after of that ttl.
Millis smallest_ttl_riding(Millis window, std::optional<Millis> kill_after);

// A lease as rlock run's supervisor watches it: Renewals, or a fake in the unit tests.
class Lease {
public:
  enum class State : int {
    held,
    not_mine,  // a renewal found the key gone or someone else's: lost now
    expired,   // no renewal succeeded before the deadline (Redis unreachable, or we were frozen)
  };
  virtual ~Lease() = default;

  // The end of the last confirmed lease, and what is known of it now.
  virtual TimePoint deadline() const = 0;
  virtual State state() const = 0;
  // Readable at every change (renewed, lost); drain_wakeups() empties it.
  virtual int wake_fd() const = 0;
  virtual void drain_wakeups() = 0;
  // The renewals' thread: when it must run by, whether it does, and its start (throws
  // std::system_error when it cannot: ulimit -u).
  virtual TimePoint start_due() const = 0;
  virtual bool started() const = 0;
  virtual void start() = 0;
  // What the run is doing (run_phase.h), for status to show: sent with the next renewal, made
  // at once by renewals that run. Never blocks on Redis. False when it is no news (running,
  // and never anything else): nothing to send.
  virtual bool set_phase(const RunPhase& phase) = 0;
};

class Renewals : public Lease {
public:
  // ACQUIRE_SENT: when the command that took the lock was sent. The renewals signal every change
  // (renewed, lost) by making wake_fd() readable. ON_RENEWED, if given, is called on the
  // renewal thread with each new deadline as soon as a renewal is confirmed, so that something
  // outside this process (run's guardian) can keep the lease's end when rlock cannot.
  using Observer = std::function<void(TimePoint deadline)>;
  Renewals(Lock& lock, Millis ttl, TimePoint acquire_sent, Observer on_renewed = {});
  ~Renewals();
  Renewals(const Renewals&) = delete;
  Renewals& operator=(const Renewals&) = delete;

  // The thread is needed only from the first renewal on, ttl/3 after acquisition: a command
  // that ends sooner (most cron jobs' `true` moments, every benchmark's) never pays for it.
  // Call start() by start_due(); calling it earlier is fine, later delays the first renewal.
  TimePoint start_due() const override { return next_renewal_ - renew_interval(ttl_) / 2; }
  void start() override;
  bool started() const override { return thread_.joinable(); }
  // Stops renewing and joins the thread; the Lock is the caller's again afterwards.
  void stop();
  bool set_phase(const RunPhase& phase) override;

  TimePoint deadline() const override { return TimePoint(TimePoint::duration(deadline_.load())); }
  State state() const override { return static_cast<State>(state_.load()); }
  int wake_fd() const override { return wake_read_.get(); }
  void drain_wakeups() override;

  int64_t renewals() const { return renewals_.load(); }
  int64_t renewal_failures() const { return failures_.load(); }

private:
  void run();
  void notify();
  void lose(State why);
  void confirm(TimePoint sent, int64_t failures_in_row);
  PhaseUpdate phase_update(TimePoint sent, uint64_t& generation);
  void phase_sent(uint64_t generation);

  Lock& lock_;
  const Millis ttl_;
  const Observer on_renewed_;
  std::atomic<TimePoint::rep> deadline_;
  std::atomic<int> state_{static_cast<int>(State::held)};
  std::atomic<int64_t> renewals_{0};
  std::atomic<int64_t> failures_{0};
  TimePoint next_renewal_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  // The run's phase and its changes, guarded by mu_: a change wakes the thread to renew at
  // once with it. phase_sent_ is the change the last renewal carried; while the phase is not
  // running, every renewal keeps it as long as the lock (phase_kept_).
  RunPhase phase_;
  uint64_t phase_generation_ = 0, phase_sent_ = 0;
  bool phase_changed_ = false;
  bool phase_kept_ = false;
  std::thread thread_;
  Fd wake_read_, wake_write_;
};

// When an unrenewed lease counts as lost: with --on-lost kill, early enough that SIGKILL
// (KILL_AFTER after the kill signal) lands by DEADLINE; with --on-lost ignore, at DEADLINE.
inline TimePoint loss_threshold(TimePoint deadline, Millis kill_after, bool ignore_loss) {
  return ignore_loss ? deadline : deadline - kill_after;
}

// The one safety question `rlock run` and acquire --while-pid's keeper both ask of their lease
// at a moment: may the command go on, and if not, how is it stopped (docs/DESIGN.md "Lease
// safety").
struct LossVerdict {
  enum class Act {
    go_on,     // held, and not yet at its loss threshold
    ignore,    // lost, with --on-lost ignore: the command runs on without the lock
    kill_now,  // SIGKILL now: past the deadline the key may be someone else's already
    stop,      // the kill signal now, SIGKILL at kill_at
  } act = Act::go_on;
  enum class Why {
    none,
    ran_out,      // the lease ended unrenewed (rlock was frozen, or the deadline passed)
    not_ours,     // broken, deleted, or another token holds it
    unreachable,  // no renewal succeeded, and the end is near
  } why = Why::none;
  TimePoint kill_at{};
};

// The verdict at NOW on a lease in STATE that ends at DEADLINE. A broken lock (not_ours) gets
// KILL_AFTER for its command to stop, but no more than the lease: `release --force` keeps
// the key taken until the lease's end, and no longer (break_lock.lua).
LossVerdict judge_lease(Lease::State state, TimePoint deadline, TimePoint now, Millis kill_after,
                        bool ignore_loss);

}  // namespace rlock
