#include "process/child.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "process/signals.h"
#include "process/terminal.h"
#include "util/error.h"
#include "util/exit_status.h"
#include "util/proc_stat.h"
#include "util/resources.h"

extern char** environ;

namespace rlock {

namespace {

// Why the command dies with rlock, however rlock dies:
//
// The command runs in a process group of its own (so that signals and the terminal reach it and
// everything it started), which means nothing that kills rlock's group reaches it: not
// coreutils `timeout -s KILL` (it signals its whole group), not supervisord's killasgroup, not
// `kill -KILL -PGID`. PR_SET_PDEATHSIG would reach the command itself but not the processes it
// started. So a guardian process watches rlock: it holds the read end of a pipe whose only
// writer is rlock, and the kernel closes that end's last writer however rlock exits (SIGKILL,
// the OOM killer, a crash), so end of file means "rlock is gone": the guardian SIGKILLs the
// command's whole group at once. The guardian is in a process group of its own too, so the
// signal that kills rlock's group does not kill the guardian with it; it blocks the signals
// rlock forwards. If the guardian dies anyway (killed by pid or name), rlock starts another
// (replace_dead_guardian). If both die together (`pkill -KILL rlock`), the command itself still
// gets SIGKILL from the kernel (PR_SET_PDEATHSIG, set before exec), but what it started runs on.
// Out of reach: processes that left the group (setsid, a daemon's double fork); a
// cgroup-wide kill (systemd KillMode=control-group) needs no help.
//
// Why the command stops at the lease's end even when rlock cannot stop it:
//
// rlock's main process decides when the lease is lost, and its renewal thread is what extends
// it; both stop with rlock: a SIGSTOP, a debugger, a cgroup freezer on one process, a Ctrl-Z
// whose `fg` comes late, a host so loaded that rlock is not scheduled. A command that runs on
// meanwhile runs unlocked once the lease ends, beside the next holder. So the guardian, which
// is a process of its own, keeps a deadline too: the end of the last confirmed lease (send
// time + ttl - drift, the keeper's own deadline), written by the renewal thread into memory
// the two share each time a renewal succeeds. When rlock has not begun stopping the command by
// half of kill-after past the point where it would have (the deadline - kill-after), the
// guardian sends the kill signal (and CONT, so that a stopped command can act on it), and at
// the deadline SIGKILL, as rlock would have. Half of kill-after is rlock's head start, so that
// a rlock that is merely busy does the stopping, with its log lines, and the command is not
// signalled twice. The guardian needs nothing of rlock to do this: no lock, no allocation,
// only its own clock and kill(2). What it cannot cover is a frozen host: if the guardian is
// stopped too (a paused VM, a SIGSTOP of every process of the job), nothing runs, the
// command included; the next holder may start while it is frozen, and its fence is greater.
//
// Guardian protocol, on a pipe from rlock and the child to the guardian:
//   'p' + 4-byte pgid  from the child, just before exec: the group to kill
//   'q'                from rlock: exit quietly
//   end of file        every writer is gone, so rlock died: SIGKILL the group
constexpr char k_guard_pgid = 'p';
constexpr char k_guard_quit = 'q';

bool read_full(int fd, void* buf, size_t len) {
  auto* p = static_cast<char*>(buf);
  while (len > 0) {
    ssize_t n = ::read(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

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

}  // namespace

// The lease as the guardian sees it, in memory shared with rlock (MAP_SHARED: in TSan builds
// the guardian is a fork). Times are CLOCK_MONOTONIC nanoseconds, the steady clock's. Written
// with __atomic builtins, not std::atomic: the guardian calls no library function.
struct Child::GuardedLease {
  int64_t deadline_ns;    // 0: no lease to guard
  int64_t kill_after_ns;  // the kill signal goes out this long before the deadline
  int32_t kill_signal;
  int32_t stopping;  // rlock has begun stopping the command itself
  int32_t fired;     // the guardian signalled the group for the lease
};

namespace {

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

// Starts the guardian on pipe end FD, guarding LEASE, in a process group of its own; returns
// its pid.
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

// The guardian's view of the lease, in memory it shares with rlock, fork or not.
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

// Our environment with the command's variables set (RLOCK_KEY ...) and rlock's secrets taken
// out, built before fork: the child may not allocate.
std::vector<std::string> child_environment(const std::vector<std::string>& overrides,
                                           const std::vector<std::string>& unset) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string_view entry(*e);
    bool replaced = false;
    for (const auto& o : overrides) {
      size_t eq = o.find('=');
      if (entry.substr(0, eq + 1) == std::string_view(o).substr(0, eq + 1)) replaced = true;
    }
    for (const auto& name : unset)
      if (entry.size() > name.size() && entry.starts_with(name) && entry[name.size()] == '=')
        replaced = true;
    if (!replaced) env.emplace_back(entry);
  }
  env.insert(env.end(), overrides.begin(), overrides.end());
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

bool is_executable_file(const std::string& path, int* err) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    *err = errno;
    return false;
  }
  if (S_ISDIR(st.st_mode)) {
    *err = EISDIR;
    return false;
  }
  if (::access(path.c_str(), X_OK) != 0) {
    *err = errno;
    return false;
  }
  return true;
}

CommandProblem problem_for_errno(const std::string& file, int err) {
  if (err == ENOENT || err == ENOTDIR) return {k_exit_not_found, file + ": command not found"};
  return {k_exit_not_executable, file + ": cannot execute: " + std::strerror(err)};
}

// What the child needs between its creation and exec, prepared by rlock beforehand.
struct ChildStart {
  const char* file;  // with a '/': exec'd as is; without: searched in $PATH
  char** argv;
  char** envp;
  const SignalEvents* signals;
  pid_t parent;     // rlock
  int terminal_fd;  // -1: not the terminal's foreground job
  int guard_fd;
  int exec_error_fd;
};

// The child between creation and exec: its own process group (the terminal's foreground one),
// its pgid to the guardian before exec (so there is no moment without a guard), the signal
// state rlock started with, then exec. Only what a vfork child may do.
int child_main(void* arg) {
  const auto* c = static_cast<const ChildStart*>(arg);
  ::setpgid(0, 0);
  // The last line of defence (see the top of this file): the kernel kills the command when rlock
  // dies; if rlock died already, do not start it at all.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != c->parent) ::_exit(k_exit_internal);
  pid_t self = ::getpid();
  if (c->terminal_fd >= 0) ::tcsetpgrp(c->terminal_fd, self);
  char msg[1 + sizeof(pid_t)];
  msg[0] = k_guard_pgid;
  std::memcpy(msg + 1, &self, sizeof self);
  write_all(c->guard_fd, msg, sizeof msg);
  c->signals->restore_for_child();
  ::execvpe(c->file, c->argv, c->envp);
  int err = errno;
  write_all(c->exec_error_fd, &err, sizeof err);
  ::_exit(k_exit_not_found);
}

// Starts the child. Like posix_spawn, with CLONE_VM | CLONE_VFORK: no copy of rlock's page
// tables and no copy-on-write faults afterwards, and rlock waits (frozen) only until the exec.
// Until the exec the child takes no lock and allocates nothing: rlock's stderr writer thread
// (util/stderr_writer.h) may hold the allocator's locks meanwhile. Sanitizer builds fork: the
// sanitizers' interceptors are not made for a child that shares their memory.
pid_t spawn_child(ChildStart& start) {
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  pid_t pid = ::fork();
  if (pid == 0) child_main(&start);
#else
  // A stack for the moment between clone and exec (execvpe builds paths and script argv on
  // it). Static rather than mapped per run: an munmap must flush the TLB of every CPU the
  // guardian, which shares this memory, may have run on. One command per rlock, so one user.
  alignas(64) static char stack[256 * 1024];
  pid_t pid = ::clone(child_main, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &start);
#endif
  if (pid < 0) throw system_call_error("cannot start the command", "fork", errno, Call::spawning);
  return pid;
}

}  // namespace

int exit_status_from_wait(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return exit_status_for_signal(WTERMSIG(wait_status));
  return k_exit_internal;
}

std::optional<CommandProblem> check_command(const std::string& file, std::string* path) {
  if (file.empty()) return CommandProblem{k_exit_not_found, "empty command name"};
  int err = 0;
  if (file.find('/') != std::string::npos) {
    if (!is_executable_file(file, &err)) return problem_for_errno(file, err);
    if (path) *path = file;
    return std::nullopt;
  }
  const char* path_env = std::getenv("PATH");
  std::string dirs = path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
  int first_err = ENOENT;  // like execvp: report EACCES when some candidate existed
  size_t start = 0;
  for (;;) {
    size_t colon = dirs.find(':', start);
    std::string dir = dirs.substr(start, colon == std::string::npos ? colon : colon - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + file;
    if (is_executable_file(candidate, &err)) {
      if (path) *path = candidate;
      return std::nullopt;
    }
    if (err != ENOENT && err != ENOTDIR) first_err = err;
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return problem_for_errno(file, first_err);
}

Child::Child(const Spec& spec, const SignalEvents& signals, Terminal* terminal)
    : lease_(map_guarded_lease(spec.lease)) {
  std::vector<std::string> argv_store = spec.argv;
  std::vector<std::string> env_store = child_environment(spec.env, spec.unset);
  std::vector<char*> argv = c_strings(argv_store);
  std::vector<char*> envp = c_strings(env_store);

  start_guardian_process();
  // Processes the command leaves behind become rlock's children when their parent exits, not
  // init's: rlock hears of their end (SIGCHLD) and reaps them (poll()).
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);

  // Reports exec's errno; closed by a successful exec (O_CLOEXEC), so EOF means it ran.
  int exec_pipe[2];
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0)
    throw system_call_error("cannot start the command", "pipe2");
  Fd exec_read(exec_pipe[0]), exec_write(exec_pipe[1]);

  ChildStart start{spec.path.empty() ? argv[0] : spec.path.c_str(),
                   argv.data(),
                   envp.data(),
                   &signals,
                   ::getpid(),
                   terminal ? terminal->fd() : -1,
                   guard_write_.get(),
                   exec_write.get()};
  pid_ = spawn_child(start);
  // Both sides set the group and the terminal, so neither order of running can race.
  ::setpgid(pid_, pid_);
  if (terminal) terminal->hand_to(pid_);
  exec_write.reset();
  int err = 0;
  if (read_full(exec_read.get(), &err, sizeof err)) {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {}
    exited_ = true;
    exec_problem_ = problem_for_errno(spec.argv[0], err);
  }
}

Child::~Child() {
  // An exception between fork and a normal end: leave no child running unguarded.
  // Also after the command itself exited: what it left in its group (--leftovers wait) must
  // not outlive the lock, which is given back after this.
  if (pid_ > 0 && (!exited_ || live_group_members() > 0)) {
    ::kill(-pid_, SIGKILL);
    if (!exited_)
      while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {}
  }
  if (guardian_ > 0) {
    dismiss_guardian();
    // Reap it if it is already gone, but do not wait: it exits on its own, and rlock's exit
    // hands any zombie to init.
    ::waitpid(guardian_, nullptr, WNOHANG);
  }
}

void Child::start_guardian_process() {
  int guard[2];
  if (::pipe2(guard, O_CLOEXEC) != 0) throw system_call_error("cannot start the guardian", "pipe2");
  Fd guard_read(guard[0]);
  guard_write_.reset(guard[1]);
  guardian_ = start_guardian(guard_read.get(), lease_);
}

std::optional<int> Child::replace_dead_guardian() {
  if (!guardian_status_ || !guard_write_.valid()) return std::nullopt;
  int status = *std::exchange(guardian_status_, std::nullopt);
  start_guardian_process();
  char msg[1 + sizeof(pid_t)];
  msg[0] = k_guard_pgid;
  std::memcpy(msg + 1, &pid_, sizeof pid_);
  write_all(guard_write_.get(), msg, sizeof msg);
  return exit_status_from_wait(status);
}

void Child::signal_group(int sig) const {
  if (pid_ > 0) ::kill(-pid_, sig);
}

void Child::extend_lease(TimePoint deadline) {
  int64_t ns = std::chrono::nanoseconds(deadline.time_since_epoch()).count();
  int64_t seen = __atomic_load_n(&lease_->deadline_ns, __ATOMIC_ACQUIRE);
  // Only later: a renewal's deadline never shortens one confirmed after it. And only a lease
  // there is: zero means the command may outlive it (--on-lost ignore).
  while (seen != 0 && ns > seen &&
         !__atomic_compare_exchange_n(&lease_->deadline_ns, &seen, ns, false, __ATOMIC_ACQ_REL,
                                      __ATOMIC_ACQUIRE)) {}
}

void Child::stopping() { __atomic_store_n(&lease_->stopping, 1, __ATOMIC_RELEASE); }

bool Child::guardian_stopped_group() const {
  return __atomic_load_n(&lease_->fired, __ATOMIC_ACQUIRE) != 0;
}

std::optional<Child::Event> Child::poll() {
  if (stopped_) return std::exchange(stopped_, std::nullopt);
  // One reaping loop for every child rlock has, so that none is reaped by the wrong wait.
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(-1, &status, WNOHANG | WUNTRACED);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return std::nullopt;  // nothing more has ended, or no children at all
    if (r == guardian_) {
      if (!WIFSTOPPED(status)) guardian_status_ = status;
    } else if (r == pid_ && !exited_) {
      if (WIFSTOPPED(status)) return Event{Event::Kind::stopped, WSTOPSIG(status)};
      exited_ = true;
      return Event{Event::Kind::exited, exit_status_from_wait(status), WIFSIGNALED(status)};
    }
    // Anything else is a process the command left behind, re-parented to rlock (the subreaper)
    // when its parent exited: reaped now, so that it does not linger as a zombie in the group.
  }
}

int Child::live_group_members() const {
  if (pid_ <= 0 || (::kill(-pid_, 0) != 0 && errno == ESRCH)) return 0;
  return live_processes_in_group(pid_);
}

void Child::dismiss_guardian() {
  if (!guard_write_.valid()) return;
  char quit = k_guard_quit;
  write_all(guard_write_.get(), &quit, 1);
  guard_write_.reset();
}

}  // namespace rlock
