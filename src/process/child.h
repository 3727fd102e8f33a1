// The command rlock runs: its own process group, its environment, and a guardian process that
// stops the whole group if rlock dies, even by SIGKILL of rlock's whole process group, and at
// the end of the lease it is told of if rlock cannot act itself (stopped, hung, starved; guardian.h
// argues how). Knows nothing of Redis: a lease is only a point on the monotonic clock here.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "process/process_group.h"
#include "util/clock.h"
#include "util/duration.h"
#include "util/fd.h"

namespace rlock {

class SignalEvents;
class Terminal;

// The shell-style status of a wait(2) status: the exit code, or 128+N for death by signal N.
int exit_status_from_wait(int wait_status);

// Our environment with OVERRIDES ("NAME=value") set and the names in UNSET taken out, built
// before fork (a child may not allocate); and C_STRINGS' array of pointers into STRINGS, for
// execve.
std::vector<std::string> child_environment(const std::vector<std::string>& overrides,
                                           const std::vector<std::string>& unset);
std::vector<char*> c_strings(std::vector<std::string>& strings);

// Whether FILE can be executed, searched in $PATH as execvp(3) does when it has no '/'.
// Returns nullopt when it can (and, with PATH, where it was found), else {126 or 127, reason}.
struct CommandProblem {
  int exit_status;
  std::string message;
};
std::optional<CommandProblem> check_command(const std::string& file, std::string* path = nullptr);

class Child : public ProcessGroup {
public:
  struct Spec {
    std::vector<std::string> argv{};
    std::vector<std::string> env{};    // "NAME=value" added to (or replacing in) our environment
    std::vector<std::string> unset{};  // NAMEs of our environment the command does not get
    std::string path{};  // the program, found already; empty: search $PATH for argv[0]
    // The lease the guardian keeps the command within, from before it starts; none: the
    // command may outlive the lease (--on-lost ignore).
    struct Lease {
      TimePoint deadline;  // the end of the last confirmed lease: SIGKILL lands by then
      int kill_signal;     // sent kill_after before the deadline (by rlock, or the guardian)
      Millis kill_after;
    };
    std::optional<Lease> lease{};
    // The command's stdout and stderr instead of rlock's (the output capture's pipes, made
    // O_CLOEXEC); -1: rlock's own.
    int stdout_fd = -1;
    int stderr_fd = -1;
    // The command's stdin instead of rlock's (--notify's /dev/null); -1: rlock's own.
    int stdin_fd = -1;
    // A descriptor of rlock's (O_CLOEXEC) that the command keeps open at the same number, for
    // it to find by /dev/fd/N (--notify's RLOCK_OUTPUT_FILE); -1: none.
    int passed_fd = -1;
  };

  // Forks the guardian, then the child in a new process group (the terminal's foreground group
  // when TERMINAL is given). Throws Error(125) when fork fails. When exec fails, the child is
  // already reaped and exec_problem() says why.
  Child(const Spec& spec, const SignalEvents& signals, Terminal* terminal);
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const override { return pid_; }
  const std::optional<CommandProblem>& exec_problem() const { return exec_problem_; }

  void signal_group(int sig) const override;

  // The lease was confirmed until DEADLINE (a renewal succeeded): the guardian moves its own
  // deadline there. Safe from any thread; only ever later deadlines count.
  void extend_lease(TimePoint deadline);
  void stopping() override;
  bool guardian_stopped_group() const override;

  struct GuardedLease;  // what the guardian shares with rlock (guardian.h)

  // Also reaps the guardian, and the processes the command left behind, whose parent rlock
  // becomes as their subreaper (leaving the command's and the guardian's ends for poll()).
  std::optional<Event> poll() override;

  // What the command and every process of it that rlock reaped used (wait4's rusage): CPU time
  // summed, the largest resident set among them. Each process's own rusage also holds the
  // children it waited for itself, so the whole tree is counted once.
  struct Usage {
    Millis user{0};
    Millis sys{0};
    int64_t max_rss_kb = 0;
  };
  const Usage& usage() const { return usage_; }

  std::optional<int> replace_dead_guardian() override;
  int live_group_members() const override;

  // The child is done and rlock will exit normally: the guardian leaves without killing
  // anything (background processes the child left behind are the child's business).
  void dismiss_guardian();

private:
  void start_guardian_process();
  void add_usage(const rusage& used);

  GuardedLease* lease_;  // never freed: a guardian may still read it after rlock exits
  pid_t pid_ = -1;
  pid_t guardian_ = -1;
  Fd guard_write_;  // EOF on the guardian's end (rlock died) means: kill the group
  bool exited_ = false;
  std::optional<Event> stopped_;        // a stop of the command not yet returned by poll()
  std::optional<int> guardian_status_;  // the guardian ended with this wait status
  std::optional<CommandProblem> exec_problem_;
  Usage usage_;
};

}  // namespace rlock
