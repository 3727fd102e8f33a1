#include "process/hook.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "process/child.h"
#include "process/signals.h"
#include "util/clock.h"

namespace rlock {

namespace {

// After KILL, how long to wait for the shell to be reaped (a process in uninterruptible sleep
// dies only when it wakes); then rlock goes on, and its exit leaves the zombie to init.
constexpr Millis k_reap_grace{1000};

// The shell's wait status once it has ended, waiting up to UNTIL; nothing when it has not.
std::optional<int> reaped(pid_t pid, TimePoint until) {
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) return 0;  // not ours to wait for any more
    if (Clock::now() >= until) return std::nullopt;
    ::poll(nullptr, 0, 10);
  }
}

}  // namespace

HookEnd run_hook(const std::string& text, const std::vector<std::string>& env,
                 const std::vector<std::string>& unset, Millis timeout, SignalEvents& signals) {
  // All the child needs is made before fork: rlock may have threads, and the child may not
  // allocate.
  std::vector<std::string> argv_store{"sh", "-c", text};
  std::vector<std::string> env_store = child_environment(env, unset);
  std::vector<char*> argv = c_strings(argv_store);
  std::vector<char*> envp = c_strings(env_store);
  TimePoint deadline = Clock::now() + timeout;
  pid_t pid = ::fork();
  if (pid < 0) return {HookEnd::Kind::not_started, 0, std::string("fork: ") + std::strerror(errno)};
  if (pid == 0) {
    signals.restore_for_child();
    ::setpgid(0, 0);
    int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // closed by the exec; 0 is not
    if (null >= 0) ::dup2(null, STDIN_FILENO);
    ::dup2(STDERR_FILENO, STDOUT_FILENO);
    ::execve("/bin/sh", argv.data(), envp.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // both sides: neither order of running can race
  auto stop = [&](HookEnd::Kind why) {
    ::kill(-pid, SIGKILL);
    (void)reaped(pid, Clock::now() + k_reap_grace);
    return HookEnd{why, 0, ""};
  };
  for (;;) {
    if (auto status = reaped(pid, Clock::now()))
      return {HookEnd::Kind::exited, exit_status_from_wait(*status), ""};
    TimePoint now = Clock::now();
    if (now >= deadline) return stop(HookEnd::Kind::timed_out);
    pollfd fd{signals.fd(), POLLIN, 0};
    if (::poll(&fd, 1, millis_until(deadline)) <= 0) continue;
    while (auto sig = signals.next())
      if (ends_a_process(*sig)) return stop(HookEnd::Kind::interrupted);
  }
}

}  // namespace rlock
