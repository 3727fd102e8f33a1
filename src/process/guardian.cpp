#include "process/guardian.h"

#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <new>

#include "util/resources.h"

namespace rlock {

namespace {

// The guardian shares rlock's memory (CLONE_VM, like vfork's child) instead of copying it as
// fork would: copying the page tables and then taking a copy-on-write fault for every page
// rlock writes afterwards cost about 0.5 ms per run (measured). So it runs on a stack of its
// own, touches nothing of rlock's memory but its argument, and calls the kernel directly:
// no libc state (errno, locks, buffers) is shared with rlock's threads. Sanitizers are kept
// out for the same reason.
constexpr size_t k_guardian_stack = 64 * 1024;

#define RLOCK_NO_SANITIZE __attribute__((no_sanitize("address", "thread", "undefined")))

RLOCK_NO_SANITIZE long raw_read(int fd, void* buf, size_t len) {
  return ::syscall(SYS_read, fd, buf, len);
}

RLOCK_NO_SANITIZE bool guardian_read_full(int fd, char* buf, size_t len) {
  while (len > 0) {
    long n = raw_read(fd, buf, len);
    if (n <= 0) return false;  // EOF, or an error: both mean rlock is gone
    buf += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

RLOCK_NO_SANITIZE int64_t guardian_now_ns() {
  timespec ts{};
  ::syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// What the guardian is started with: the end of its pipe, and the lease it guards.
struct GuardianArgs {
  int fd;
  Child::GuardedLease* lease;
};

RLOCK_NO_SANITIZE int guardian_main(void* arg) {
  const GuardianArgs args = *static_cast<GuardianArgs*>(arg);
  int fd = args.fd;
  Child::GuardedLease* lease = args.lease;
  // Out of rlock's process group before anything can signal it (rlock does the same from its
  // side, so there is no moment with a command and a guardian in rlock's group).
  ::syscall(SYS_setpgid, 0, 0);
  ::syscall(SYS_prctl, PR_SET_NAME, "rlock-guardian", 0, 0, 0);
  // Hold nothing of rlock's: not its Redis socket (the server would keep the connection), not
  // its stdout (a `$(rlock run ...)` would wait for the guardian to close it).
  if (fd > 0) ::syscall(SYS_close_range, 0u, static_cast<unsigned>(fd - 1), 0u);
  ::syscall(SYS_close_range, static_cast<unsigned>(fd + 1), ~0u, 0u);
  // The signals rlock forwards stay blocked here: a `kill -TERM -<rlock's group>` must not take
  // the guardian down before rlock has forwarded it.
  pid_t pgid = 0;
  bool signalled = false, killed = false;
  for (;;) {
    // The lease's end (top of this file): the kill signal if rlock has not sent it by half of
    // kill-after late, SIGKILL at the deadline. Read anew on every turn: renewals move it.
    timespec wait{}, *timeout = nullptr;
    int64_t deadline = __atomic_load_n(&lease->deadline_ns, __ATOMIC_ACQUIRE);
    if (pgid > 0 && deadline > 0 && !killed) {
      int64_t kill_after = lease->kill_after_ns;
      int64_t signal_at = deadline - kill_after / 2;
      bool rlock_stopping = __atomic_load_n(&lease->stopping, __ATOMIC_ACQUIRE) != 0;
      int64_t now = guardian_now_ns();
      if (now >= deadline) {
        __atomic_store_n(&lease->fired, 1, __ATOMIC_RELEASE);
        ::syscall(SYS_kill, -pgid, SIGKILL);
        killed = true;
        continue;
      }
      if (now >= signal_at && !signalled && !rlock_stopping) {
        __atomic_store_n(&lease->fired, 1, __ATOMIC_RELEASE);
        ::syscall(SYS_kill, -pgid, lease->kill_signal);
        ::syscall(SYS_kill, -pgid, SIGCONT);
        signalled = true;
      }
      int64_t next = signalled || rlock_stopping ? deadline : signal_at;
      wait.tv_sec = (next - now) / 1'000'000'000;
      wait.tv_nsec = (next - now) % 1'000'000'000;
      timeout = &wait;
    }
    pollfd in{fd, POLLIN, 0};
    long ready = ::syscall(SYS_ppoll, &in, 1, timeout, nullptr, 0);
    if (ready <= 0) continue;  // the time came (or EINTR, after a stop): look again
    char op;
    if (!guardian_read_full(fd, &op, 1)) break;
    // exit_group, not exit: in sanitizer builds the guardian is forked, and the runtime's own
    // thread would keep a guardian whose main thread merely exited alive for ever.
    if (op == k_guard_quit) ::syscall(SYS_exit_group, 0);
    if (op == k_guard_pgid && !guardian_read_full(fd, reinterpret_cast<char*>(&pgid), sizeof pgid))
      break;
  }
  if (pgid > 0) ::syscall(SYS_kill, -pgid, SIGKILL);
  ::syscall(SYS_exit_group, 0);
  return 0;
}

// Whether the guardian must be a fork rather than a process that shares rlock's memory:
// ThreadSanitizer cannot follow one, and Valgrind runs no clone() but a thread's, fork's or
// vfork's: it ends the program at the guardian's, with the lock taken (found by its preload).
bool fork_guardian() {
#if defined(__SANITIZE_THREAD__)
  return true;
#else
  const char* preload = std::getenv("LD_PRELOAD");
  return preload && std::strstr(preload, "vgpreload");
#endif
}

}  // namespace

pid_t start_guardian(int fd, Child::GuardedLease* lease) {
  GuardianArgs args{fd, lease};
  if (fork_guardian()) {
    pid_t forked = ::fork();
    if (forked < 0)
      throw system_call_error("cannot start the guardian", "fork", errno, Call::spawning);
    if (forked == 0) guardian_main(&args);
    ::setpgid(forked, forked);
    return forked;
  }
  // Never unmapped: the guardian may outlive rlock, and rlock exits soon after the run.
  void* stack = ::mmap(nullptr, k_guardian_stack, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) throw system_call_error("cannot start the guardian", "mmap");
  // The argument lives at the top of the guardian's own stack, where rlock never writes again.
  char* top = static_cast<char*>(stack) + k_guardian_stack - 64;
  std::memcpy(top, &args, sizeof args);
  pid_t pid = ::clone(guardian_main, top, CLONE_VM | SIGCHLD, top);
  if (pid < 0) throw system_call_error("cannot start the guardian", "clone", errno, Call::spawning);
  ::setpgid(pid, pid);
  return pid;
}

Child::GuardedLease* map_guarded_lease(const std::optional<Child::Spec::Lease>& lease) {
  void* page = ::mmap(nullptr, sizeof(Child::GuardedLease), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) throw system_call_error("cannot start the guardian", "mmap");
  auto* guarded = new (page) Child::GuardedLease{};
  if (lease) {
    guarded->deadline_ns = std::chrono::nanoseconds(lease->deadline.time_since_epoch()).count();
    guarded->kill_after_ns = std::chrono::nanoseconds(lease->kill_after).count();
    guarded->kill_signal = lease->kill_signal;
  }
  return guarded;
}

}  // namespace rlock
