#include "process/pid_watch.h"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "util/proc_stat.h"
#include "util/resources.h"

namespace rlock {

namespace {

// Whether PID is still the process that started at START_TICKS, and has not exited.
bool same_and_alive(pid_t pid, int64_t start_ticks) {
  auto st = read_proc_stat(pid);
  return st && st->start_ticks == start_ticks && !has_exited(st->state);
}

}  // namespace

std::optional<PidWatch> PidWatch::open(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  // /proc/PID/stat unread for want of a descriptor is no news of PID.
  auto unread = [pid] {
    if (shortage(errno, Call::opening))
      throw system_call_error("cannot watch --while-pid " + std::to_string(pid),
                              "open /proc/" + std::to_string(pid) + "/stat");
  };
  errno = 0;
  auto st = read_proc_stat(pid);
  if (!st) unread();
  if (!st || has_exited(st->state)) return std::nullopt;
  Fd pidfd;
#ifdef SYS_pidfd_open
  pidfd.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (pidfd.valid()) ::fcntl(pidfd.get(), F_SETFD, FD_CLOEXEC);
#endif
  // The pidfd names whatever has PID now: make sure that is still the process looked at.
  errno = 0;
  if (!same_and_alive(pid, st->start_ticks)) {
    unread();
    return std::nullopt;
  }
  pid_t group = st->pgrp == pid ? pid : 0;
  return PidWatch(pid, st->start_ticks, group, std::move(pidfd));
}

bool PidWatch::all_gone() const {
  if (!exited()) return false;
  if (group_ == 0 || (::kill(-group_, 0) != 0 && errno == ESRCH)) return true;
  return live_processes_in_group(group_) == 0;
}

bool PidWatch::exited() const {
  if (pidfd_.valid()) {
    pollfd p{pidfd_.get(), POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
  }
  return !same_and_alive(pid_, start_ticks_);
}

bool PidWatch::signal(int sig) const {
  // The group outlives its leader while a member lives, and its id is no one else's meanwhile.
  if (group_ != 0 && ::kill(-group_, sig) == 0) return true;
#ifdef SYS_pidfd_send_signal
  if (pidfd_.valid()) return ::syscall(SYS_pidfd_send_signal, pidfd_.get(), sig, nullptr, 0) == 0;
#endif
  return same_and_alive(pid_, start_ticks_) && ::kill(pid_, sig) == 0;
}

}  // namespace rlock
