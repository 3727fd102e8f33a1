// The command's process group as rlock run's supervisor watches it: Child for a command rlock
// started, a fake in the unit tests, or the process of `acquire --while-pid` (run/keeper.cpp),
// which rlock did not start. Signals reach the whole group; the end of rlock's own child is learnt
// from SIGCHLD (rlock's signal events), then poll().
#pragma once

#include <sys/types.h>

#include <optional>

#include "util/duration.h"

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

  // Whether the group is rlock's child. One that is not (acquire --while-pid) sends no SIGCHLD:
  // poll() is asked at every wake, news_fd() is readable when it may have news (-1: none), and
  // it is looked at every look_every() besides (zero: not needed). Nor is a signal sent to rlock
  // meant for it: rlock's signals stop it as rlock stop would (rlock-acquire(1)).
  virtual bool rlocks_child() const { return true; }
  virtual int news_fd() const { return -1; }
  virtual Millis look_every() const { return Millis(0); }

  // The guardian (guardian.h): rlock itself has begun stopping the group, so the guardian keeps
  // only its SIGKILL at the lease's end; whether the guardian acted on the lease's end (rlock
  // was stopped or starved); a guardian that died replaced (how it ended), so that rlock's
  // death still stops the group.
  virtual void stopping() = 0;
  virtual bool guardian_stopped_group() const = 0;
  virtual std::optional<int> replace_dead_guardian() = 0;
};

}  // namespace rlock
