// What a run holds from the lock's taking to its release, and the order it lets go in: the
// renewals stop (the lock's connection is the main thread's again), whatever is left of the
// command's group is killed, the terminal comes back, and only then is the lock given back
// (docs/DESIGN.md "Lease safety"). On every way out of the run, an early return or an
// exception, the destructor lets go in that order; the run's normal end lets go step by step
// once the supervisor saw the whole group gone (or SIGKILLed past its grace): command_done(),
// the end recorded while the lease is still renewed, stop_renewals(), then the release that
// carries the run's record.
#pragma once

#include <memory>
#include <optional>

#include "lock/held_lock.h"
#include "lock/lease.h"
#include "process/terminal.h"
#include "run/job.h"

namespace rlock {

class RunHold {
public:
  // LOCK, taken with TTL by the acquisition sent at ACQUIRED.
  RunHold(Lock& lock, Millis ttl, TimePoint acquired) : held_(std::in_place, lock, ttl, acquired) {}
  ~RunHold() { let_go(); }
  RunHold(const RunHold&) = delete;
  RunHold& operator=(const RunHold&) = delete;

  // The lock, to give back (or keep for --min-hold) with the run's record.
  HeldLock& lock() { return *held_; }
  // The command's process (each attempt's under --retry).
  JobProcess& job() { return job_; }
  const JobProcess& job() const { return job_; }

  // The terminal, once the command is about to start: rlock's controlling one, or none.
  void keep_terminal(std::unique_ptr<Terminal> terminal) { terminal_ = std::move(terminal); }
  Terminal* terminal() const { return terminal_.get(); }

  // The renewals of the lease that began at LEASE_FROM, on the lock the run took with TTL;
  // each renewal moves the command's guardian to the new deadline. Started by the supervisor
  // at the first renewal (Renewals::start_due).
  Renewals& renew(Lock& lock, Millis ttl, TimePoint lease_from) {
    renewals_.emplace(lock, ttl, lease_from,
                      [this](TimePoint deadline) { job_.extend_lease(deadline); });
    return *renewals_;
  }
  Renewals& renewals() { return *renewals_; }

  // The command's group is done and its output written on: the terminal comes back, the
  // guardian leaves. The lock is still held and renewed, for the run's end to be recorded
  // before the release that carries its record.
  void command_done() {
    if (terminal_) terminal_->take_back();
    if (job_.started()) job_.child().dismiss_guardian();
  }
  // Whether the renewal thread has the lock's connection.
  bool renewing() const { return renewals_ && renewals_->started(); }
  // The renewals stop, just before the release: the lock's connection is the main thread's
  // again.
  void stop_renewals() {
    if (renewals_) renewals_->stop();
  }

private:
  // The order that keeps the lease safe, whatever stopped the run halfway.
  void let_go() {
    if (renewals_) renewals_->stop();
    job_.kill();
    if (terminal_) terminal_->take_back();
    held_.reset();  // gives the lock back unless the run did (HeldLock)
  }

  std::optional<HeldLock> held_;
  JobProcess job_;
  std::unique_ptr<Terminal> terminal_;
  std::optional<Renewals> renewals_;
};

}  // namespace rlock
