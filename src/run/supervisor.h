// rlock run's watch over its command while an attempt runs, and between attempts (README.md);
// the run decides what comes next.
#pragma once

#include <optional>

#include "lock/history.h"
#include "lock/run_phase.h"
#include "lock/stop_request.h"
#include "util/clock.h"

namespace rlock {

class Heartbeat;
class Lease;
class ProcessGroup;
class SignalEvents;
class Terminal;
struct RunOptions;

// How an attempt (or the run, between attempts) ended, as far as rlock had a part in it.
struct AttemptEnd {
  // exited or signalled: the command's own end; lost, max_run, hung, stopped: rlock's.
  RunEnd end = RunEnd::exited;
  int status = 0;                   // the command's shell-style status (the last attempt's)
  std::optional<StopRequest> stop;  // RunEnd::stopped: who asked, and why
  // rlock was asked to stop: a signal that ends a process, Ctrl-C in the command's terminal
  // (its death by SIGINT or SIGQUIT), rlock stop. No attempt follows, and what is left of the
  // run (a reader that stalls) is not waited for.
  bool asked_to_stop = false;
  // The run ended while it waited for its next attempt: STATUS is the last attempt's, whose
  // end is recorded already.
  bool between_attempts = false;
};

// Whether END is the command's own (it exited, or died of a signal rlock did not send for a
// reason of its own).
inline bool command_ended(RunEnd end) { return end == RunEnd::exited || end == RunEnd::signalled; }

// What the supervisor watches besides the command. TERMINAL, HEARTBEAT and STOPS may be null: no
// controlling terminal, no --heartbeat-file, no listener for stop requests.
struct Watched {
  Lease& lease;
  SignalEvents& signals;
  Terminal* terminal;
  Heartbeat* heartbeat;
  StopRequests* stops;
};

class Supervisor {
public:
  // STARTED: when the lock was taken (--max-run counts from it).
  Supervisor(const RunOptions& options, const Watched& watched, TimePoint started);

  // Watches GROUP until all of it has ended: the command, and whatever it left running there
  // (flock(1) keeps its lock while any process that inherited it lives), which --leftovers kill
  // stops instead. A loss, --max-run, a hang or a stop request stops the group first.
  AttemptEnd watch(ProcessGroup& group);
  // While no command runs, until AT: the run's end when something ends it first (a signal, a
  // stop request, the loss, --max-run), told as LAST (the attempt that ended) ended; nothing
  // when AT came. The lease is renewed meanwhile; rlock keeps the terminal. LAST_GROUP, the
  // last attempt's (which may never have run), reaps what its command left and ended since.
  std::optional<AttemptEnd> wait_until(TimePoint at, const AttemptEnd& last,
                                       ProcessGroup& last_group);

  // The lease was lost (also under --on-lost ignore, when the command ran on).
  bool lost() const { return lost_; }

  // What the run is doing, for status to show (run_phase.h): carried by the next renewal,
  // which the renewal thread makes at once (started now if it was not yet). watch() says
  // "running" again; a stop says "stopping" by itself.
  void announce(const RunPhase& phase);

private:
  struct Stopping {
    RunEnd why;
    TimePoint kill_at;  // SIGKILL to the group at this point
    TimePoint since;    // the first signal
  };
  // The attempt being watched.
  struct Attempt {
    // Declared: clang takes a nested class with default member initializers for one that
    // cannot be made by default while the class around it is incomplete (optional::emplace).
    Attempt() {}
    ProcessGroup* group = nullptr;
    std::optional<int> status;  // once the command has exited
    bool signalled = false;
    std::optional<Stopping> stopping;
    std::optional<TimePoint> killed_at;
    bool leftovers_found = false;
    Millis group_poll{0};
    // A group not rlock's child, left running without the lock: asked to stop under --on-lost
    // ignore (stop_for_signal).
    bool let_go = false;
  };

  AttemptEnd attempt_end() const;
  AttemptEnd finish(AttemptEnd end) const;
  bool group_done(TimePoint now);
  void notice_guardian(TimePoint now);
  void decide(TimePoint now);
  void start_renewals(TimePoint now);
  void check_lease(TimePoint now);
  void on_stop_request();
  void begin_stop(RunEnd why, TimePoint kill_at, int sig);
  void kill_group(TimePoint now);
  TimePoint next_wake();
  void wait_for_event(TimePoint until, ProcessGroup* between = nullptr);
  void on_signal(int sig, ProcessGroup* between);
  void stop_for_signal(int sig);
  void collect_child();
  void on_child_stopped(int stop_signal);
  void resume_child(TimePoint now);
  bool stopping() const;

  const RunOptions& options_;
  const Watched w_;
  const bool ignore_loss_;  // --on-lost ignore
  TimePoint renewals_start_at_;
  bool renewals_failed_ = false;
  std::optional<TimePoint> max_run_at_;
  std::optional<TimePoint> asked_to_stop_at_;  // the first SIGTERM or SIGINT
  std::optional<StopRequest> stop_request_;
  bool interrupted_ = false;  // a signal that ends a process came
  bool suspended_ = false;    // by job control, with the command (on_child_stopped)
  bool lost_ = false;
  std::optional<Attempt> attempt_;  // none between attempts
  // Between attempts: how the run ends before its next attempt (a stop, the loss, --max-run).
  std::optional<RunEnd> ends_as_;
};

}  // namespace rlock
