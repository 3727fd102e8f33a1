// The command's process group as rlock run's supervisor watches it: Child for a command rlock
// started, a fake in the unit tests. Signals reach the whole group; its end is learnt from
// SIGCHLD (rlock's signal events), then poll().
#pragma once

#include <sys/types.h>

#include <optional>

namespace rlock {

class ProcessGroup {
public:
  virtual ~ProcessGroup() = default;

  // The command's pid, which leads the group (the terminal is handed to it).
  virtual pid_t pid() const = 0;
  // kill(2) to the whole group.
  virtual void signal_group(int sig) const = 0;
  // How many processes of the group are alive: the command and what it left running. Zombies
  // do not count.
  virtual int live_group_members() const = 0;

  struct Event {
    enum class Kind { exited, stopped } kind;
    int status;              // exited: shell-style exit status; stopped: the stop signal
    bool signalled = false;  // exited: killed by a signal (status 128+N), not an exit(N)
  };
  // After SIGCHLD: reaps whatever ended and returns the command's next state change, if any.
  virtual std::optional<Event> poll() = 0;
  // Reaps every child that has ended (rlock is the subreaper of what the command started).
  void reap() {
    while (poll()) {}
  }

  // The guardian (guardian.h): rlock itself has begun stopping the group, so the guardian keeps
  // only its SIGKILL at the lease's end; whether the guardian acted on the lease's end (rlock
  // was stopped or starved); a guardian that died replaced (how it ended), so that rlock's
  // death still stops the group.
  virtual void stopping() = 0;
  virtual bool guardian_stopped_group() const = 0;
  virtual std::optional<int> replace_dead_guardian() = 0;
};

}  // namespace rlock
