// What a run holds from the lock's taking to its release, and the order it lets go in
// (docs/ARCHITECTURE.md, step 7): the destructor on every early way out; at a normal end,
// command_done(), the end recorded while renewed, stop_renewals(), the release with the record.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "lock/held_lock.h"
#include "lock/lease.h"
#include "process/child.h"
#include "process/terminal.h"

namespace rlock {

class RunHold {
public:
  // LOCK, taken with TTL by the acquisition sent at ACQUIRED.
  RunHold(Lock& lock, Millis ttl, TimePoint acquired) : held_(std::in_place, lock, ttl, acquired) {}
  ~RunHold() { let_go(); }  // not copied: it holds a mutex

  // The lock, to give back (or keep for --min-hold) with the run's record.
  HeldLock& lock() { return *held_; }

  // The terminal, once the command is about to start: rlock's controlling one, or none.
  void keep_terminal(std::unique_ptr<Terminal> terminal) { terminal_ = std::move(terminal); }
  Terminal* terminal() const { return terminal_.get(); }

  Child::Spec spec;  // every attempt's (the run changes RLOCK_ATTEMPT)
  // Starts the command as SPEC says, in the terminal's foreground when rlock has it (a background
  // job's stays in the background); under --retry, the next attempt (after renew()) on the lease
  // the renewals confirmed, the last one's process let go. Throws as Child does.
  Child& start(const SignalEvents& signals) {
    if (child_) {
      if (spec.lease) spec.lease->deadline = renewals_->deadline();
      // Its group is gone: its guardian has nothing left to guard, and its pipe is a
      // descriptor the next one may need (ulimit -n).
      child_->dismiss_guardian();
    }
    Terminal* foreground = terminal_ && terminal_->ours() ? terminal_.get() : nullptr;
    auto next = std::make_unique<Child>(spec, signals, foreground);
    std::unique_ptr<Child> last;  // destroyed after the mutex is released
    std::lock_guard<std::mutex> hold(child_mutex_);
    last = std::exchange(child_, std::move(next));
    // A renewal that came meanwhile reaches the new guardian all the same.
    if (last && renewals_) child_->extend_lease(renewals_->deadline());
    return *child_;
  }
  Child& child() { return *child_; }

  // The renewals of the lease that began at LEASE_FROM, on the lock the run took with TTL;
  // each renewal moves the command's guardian to the new deadline (from the renewal thread).
  Renewals& renew(Lock& lock, Millis ttl, TimePoint lease_from) {
    renewals_.emplace(lock, ttl, lease_from, [this](TimePoint deadline) {
      std::lock_guard<std::mutex> hold(child_mutex_);
      if (child_) child_->extend_lease(deadline);
    });
    return *renewals_;
  }
  Renewals& renewals() { return *renewals_; }
  // Whether the renewal thread has the lock's connection.
  bool renewing() const { return renewals_ && renewals_->started(); }
  void stop_renewals() {
    if (renewals_) renewals_->stop();
  }

  // The command's group is done, before its output drains: the terminal comes back, and the
  // guardian leaves (nothing of the group is left for it to kill). The lock is still renewed.
  void command_done() {
    if (terminal_) terminal_->take_back();
    if (child_) child_->dismiss_guardian();
  }

private:
  // The order that keeps the lease safe: no renewal outlives the command, and no command the
  // lock.
  void let_go() {
    stop_renewals();
    {
      std::unique_ptr<Child> last;  // killed and reaped (~Child) after the mutex is released
      std::lock_guard<std::mutex> hold(child_mutex_);
      last = std::move(child_);
    }
    if (terminal_) terminal_->take_back();
    held_.reset();  // gives the lock back unless the run did (HeldLock)
  }

  std::optional<HeldLock> held_;
  std::mutex child_mutex_;  // child_, between the main thread and the renewal thread
  std::unique_ptr<Child> child_;
  std::unique_ptr<Terminal> terminal_;
  std::optional<Renewals> renewals_;
};

}  // namespace rlock
