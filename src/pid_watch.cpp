#include "pid_watch.h"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "proc_stat.h"

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
  auto st = read_proc_stat(pid);
  if (!st || has_exited(st->state)) return std::nullopt;
  Fd pidfd;
#ifdef SYS_pidfd_open
  pidfd.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (pidfd.valid()) ::fcntl(pidfd.get(), F_SETFD, FD_CLOEXEC);
#endif
  // The pidfd names whatever has PID now: make sure that is still the process looked at.
  if (!same_and_alive(pid, st->start_ticks)) return std::nullopt;
  return PidWatch(pid, st->start_ticks, std::move(pidfd));
}

bool PidWatch::exited() const {
  if (pidfd_.valid()) {
    pollfd p{pidfd_.get(), POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
  }
  return !same_and_alive(pid_, start_ticks_);
}

bool PidWatch::signal(int sig) const {
#ifdef SYS_pidfd_send_signal
  if (pidfd_.valid()) return ::syscall(SYS_pidfd_send_signal, pidfd_.get(), sig, nullptr, 0) == 0;
#endif
  return same_and_alive(pid_, start_ticks_) && ::kill(pid_, sig) == 0;
}

}  // namespace rlock
