#include "process/child.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string_view>
#include <utility>

#include "process/guardian.h"
#include "process/signals.h"
#include "process/terminal.h"
#include "util/error.h"
#include "util/exit_status.h"
#include "util/proc_stat.h"
#include "util/resources.h"

extern char** environ;

namespace rlock {

namespace {

// How long a SIGKILLed command (or hook) may take to be reaped as its Child ends.
constexpr Millis k_reap_grace{2000};

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

// The interpreter that the #! line of the script at PATH names, when it names one that cannot
// run (missing, or not executable); empty otherwise. The kernel's exec of such a script fails
// with ENOENT, which would read as the script itself not being found.
std::string bad_interpreter(const std::string& path, int* err) {
  Fd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  char line[256];
  ssize_t n = file.valid() ? ::read(file.get(), line, sizeof line - 1) : -1;
  if (n < 3 || line[0] != '#' || line[1] != '!') return "";
  std::string_view rest(line + 2, static_cast<size_t>(n) - 2);
  rest.remove_prefix(std::min(rest.find_first_not_of(" \t"), rest.size()));
  // The kernel ends the name at a blank or the newline: a \r of DOS line endings is in it.
  std::string interpreter(rest.substr(0, rest.find_first_of(" \t\n")));
  if (interpreter.empty()) return "";
  return is_executable_file(interpreter, err) ? "" : interpreter;
}

CommandProblem problem_for_errno(const std::string& file, int err) {
  if (err == ENOENT || err == ENOTDIR) return {k_exit_not_found, file + ": command not found"};
  return {k_exit_not_executable, file + ": cannot execute: " + std::strerror(err)};
}

// As a shell says it: a script whose interpreter cannot run is "bad interpreter" (126), not a
// command not found.
std::optional<CommandProblem> interpreter_problem(const std::string& script) {
  int err = 0;
  std::string interpreter = bad_interpreter(script, &err);
  if (interpreter.empty()) return std::nullopt;
  if (interpreter.back() == '\r')
    return CommandProblem{k_exit_not_executable,
                          script + ": bad interpreter " + interpreter.substr(0, interpreter.size() - 1) +
                              "\\r: the script has DOS line endings (\\r\\n)"};
  return CommandProblem{k_exit_not_executable,
                        script + ": bad interpreter " + interpreter + ": " + std::strerror(err)};
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
  int stdout_fd;  // -1: rlock's
  int stderr_fd;
  int stdin_fd;
  int passed_fd;  // -1: none
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
  // dup2 leaves the copy without O_CLOEXEC: the command keeps it, and only it.
  if (c->stdout_fd >= 0) ::dup2(c->stdout_fd, STDOUT_FILENO);
  if (c->stderr_fd >= 0) ::dup2(c->stderr_fd, STDERR_FILENO);
  if (c->stdin_fd >= 0) ::dup2(c->stdin_fd, STDIN_FILENO);
  // Only this process's table of descriptors changes: the clone shares rlock's memory, not
  // its descriptors.
  if (c->passed_fd >= 0) ::fcntl(c->passed_fd, F_SETFD, 0);
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
    if (auto problem = interpreter_problem(file)) return problem;
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
      if (auto problem = interpreter_problem(candidate)) return problem;
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
                   exec_write.get(),
                   spec.stdout_fd,
                   spec.stderr_fd,
                   spec.stdin_fd,
                   spec.passed_fd};
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
    std::optional<CommandProblem> script =
        err == ENOENT && !spec.path.empty() ? interpreter_problem(spec.path) : std::nullopt;
    exec_problem_ = script ? *script : problem_for_errno(spec.argv[0], err);
  }
}

Child::~Child() {
  // An exception between fork and a normal end: leave no child running unguarded. After a
  // normal end (rlock run waits for the whole group) something is left only if SIGKILL could
  // not end it yet; a hook's group is killed here once its shell ended.
  if (pid_ > 0 && (!exited_ || live_group_members() > 0)) {
    ::kill(-pid_, SIGKILL);
    // Reaped once it is gone; one in uninterruptible sleep (a file system that hangs) dies
    // only when it wakes: after k_reap_grace it is left to whoever reaps it when rlock exits.
    TimePoint give_up = Clock::now() + k_reap_grace;
    while (!exited_ && ::waitpid(pid_, nullptr, WNOHANG) == 0 && Clock::now() < give_up)
      ::poll(nullptr, 0, 5);
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
    rusage used{};
    pid_t r = ::wait4(-1, &status, WNOHANG | WUNTRACED, &used);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return std::nullopt;  // nothing more has ended, or no children at all
    if (r != guardian_ && !WIFSTOPPED(status)) add_usage(used);
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

void Child::add_usage(const rusage& used) {
  auto ms = [](const timeval& t) { return Millis(int64_t(t.tv_sec) * 1000 + t.tv_usec / 1000); };
  usage_.user += ms(used.ru_utime);
  usage_.sys += ms(used.ru_stime);
  usage_.max_rss_kb = std::max<int64_t>(usage_.max_rss_kb, used.ru_maxrss);  // kB on Linux
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
