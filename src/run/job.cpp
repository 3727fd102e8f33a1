#include "run/job.h"

#include "lock/lease.h"

namespace rlock {

Child& JobProcess::start(const SignalEvents& signals, Terminal* terminal) {
  auto child = std::make_unique<Child>(spec, signals, terminal);
  std::lock_guard<std::mutex> hold(mutex_);
  child_ = std::move(child);
  return *child_;
}

Child& JobProcess::start_next(const SignalEvents& signals, Terminal* terminal,
                              const Renewals& renewals) {
  if (spec.lease) spec.lease->deadline = renewals.deadline();
  // The last attempt's group is gone: its guardian has nothing left to guard, and its pipe is
  // a descriptor the next one may need (ulimit -n).
  child_->dismiss_guardian();
  auto next = std::make_unique<Child>(spec, signals, terminal);
  std::unique_ptr<Child> last;  // destroyed after the mutex is released
  std::lock_guard<std::mutex> hold(mutex_);
  last = std::exchange(child_, std::move(next));
  child_->extend_lease(renewals.deadline());
  return *child_;
}

void JobProcess::kill() {
  std::unique_ptr<Child> last;  // destroyed after the mutex is released
  std::lock_guard<std::mutex> hold(mutex_);
  last = std::move(child_);
}

void JobProcess::extend_lease(TimePoint deadline) {
  std::lock_guard<std::mutex> hold(mutex_);
  if (child_) child_->extend_lease(deadline);
}

}  // namespace rlock
