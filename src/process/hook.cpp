#include "process/hook.h"

#include <fcntl.h>
#include <poll.h>

#include <optional>

#include "process/child.h"
#include "process/signals.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/fd.h"

namespace rlock {

namespace {

// Waits for the hook's shell to end, for DEADLINE or for a signal that asks rlock to stop,
// whichever comes first. SIGCHLD wakes it.
HookEnd wait_for_shell(Child& hook, TimePoint deadline, SignalEvents& signals) {
  for (;;) {
    while (auto event = hook.poll())
      if (event->kind == Child::Event::Kind::exited)
        return {HookEnd::Kind::exited, event->status, ""};
    if (Clock::now() >= deadline) return {HookEnd::Kind::timed_out, 0, ""};
    pollfd fd{signals.fd(), POLLIN, 0};
    ::poll(&fd, 1, millis_until(deadline));
    while (auto sig = signals.next())
      if (ends_a_process(*sig)) return {HookEnd::Kind::interrupted, 0, ""};
  }
}

}  // namespace

HookEnd run_hook(const std::string& text, const std::vector<std::string>& env,
                 const std::vector<std::string>& unset, int passed_fd, Millis timeout,
                 SignalEvents& signals) {
  TimePoint deadline = Clock::now() + timeout;
  Fd null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!null.valid()) return {HookEnd::Kind::not_started, 0, errno_message("open /dev/null")};
  Child::Spec spec{{"sh", "-c", text}, env, unset, "/bin/sh", std::nullopt};
  spec.stdout_fd = STDERR_FILENO;
  spec.stdin_fd = null.get();
  spec.passed_fd = passed_fd;
  std::optional<Child> hook;
  try {
    hook.emplace(spec, signals, nullptr);
  } catch (const Error& e) {
    return {HookEnd::Kind::not_started, 0, e.what()};
  }
  if (auto problem = hook->exec_problem()) return {HookEnd::Kind::not_started, 0, problem->message};
  // Child's destructor KILLs the hook's group on every way out: the shell with it while it
  // runs, else what it left running there.
  return wait_for_shell(*hook, deadline, signals);
}

}  // namespace rlock
