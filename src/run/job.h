// The command of a run (rlock run): what it starts with, and its process, which --retry replaces
// by the next attempt's while the renewal thread tells the current one's guardian of each
// renewal (extend_lease, from that thread).
#pragma once

#include <memory>
#include <mutex>

#include "process/child.h"
#include "util/clock.h"

namespace rlock {

class Renewals;

class JobProcess {
public:
  Child::Spec spec;  // every attempt's (set_attempt() changes RLOCK_ATTEMPT)

  // Starts the first attempt as SPEC says, in TERMINAL's foreground when given. Throws as
  // Child does (then nothing runs).
  Child& start(const SignalEvents& signals, Terminal* terminal);
  // Starts the next attempt on the lease KEEPER confirmed, and lets the last one's process go.
  // Started without the renewal thread waiting on it; a renewal meanwhile reaches the new
  // guardian all the same (the renewals keep its deadline before they tell).
  Child& start_next(const SignalEvents& signals, Terminal* terminal, const Renewals& renewals);
  // The lease was confirmed until DEADLINE: the running attempt's guardian moves there.
  void extend_lease(TimePoint deadline);

  bool started() const { return child_ != nullptr; }
  Child& child() { return *child_; }
  const Child& child() const { return *child_; }
  // Whatever is left of the command's group is killed, and the command reaped (~Child).
  void kill();

private:
  std::mutex mutex_;  // child_, between the supervisor and the renewal thread
  std::unique_ptr<Child> child_;
};

}  // namespace rlock
