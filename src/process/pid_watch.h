// Watching another process that is not our child (acquire --while-pid): when it exits, and
// signalling it without hitting a process that took its pid since. A pidfd where the kernel
// has one (Linux 5.3); else its pid and start time, looked at on a short interval.
//
// A process that leads its process group (a script that a shell, cron or systemd started)
// stands for the whole group, as `rlock run`'s command does: the commands it started are
// signalled with it, and it is gone only once none of them is left.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>

#include "util/duration.h"
#include "util/fd.h"

namespace rlock {

// Without a pidfd, how often an exit is looked for.
inline constexpr Millis k_pid_poll_interval{50};

class PidWatch {
public:
  // PID as it is now; nullopt when there is no such process (or it has exited). Out of
  // descriptors to read /proc with: an Error (125, util/resources.h), not "no such process".
  static std::optional<PidWatch> open(pid_t pid);

  pid_t pid() const { return pid_; }
  // PID led its process group when it was opened: the group stands for it.
  bool leads_group() const { return group_ != 0; }
  // Readable once the process has exited; -1 without a pidfd (poll exited() then).
  int fd() const { return pidfd_.get(); }
  bool exited() const;
  // The process has exited, and so has every process of its group when it led one.
  bool all_gone() const;
  // Sends SIG to the process (its group, when it leads one), never to another that took its
  // pid. False when it is gone.
  bool signal(int sig) const;

private:
  PidWatch(pid_t pid, int64_t start_ticks, pid_t group, Fd pidfd)
      : pid_(pid), start_ticks_(start_ticks), group_(group), pidfd_(std::move(pidfd)) {}

  pid_t pid_;
  int64_t start_ticks_;
  pid_t group_;  // PID's group when PID leads it, else 0
  Fd pidfd_;
};

}  // namespace rlock
