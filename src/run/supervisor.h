// rlock run's watch over its command, in and between attempts (README.md).
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
  int status = 0;                     // the command's shell-style status (the last attempt's)
  std::optional<StopRequest> stop{};  // RunEnd::stopped: who asked, and why
  // rlock was asked to stop (a signal that ends a process, rlock stop, Ctrl-C in the command's
  // terminal: its death by SIGINT or SIGQUIT): no attempt follows, nor is a stalled reader awaited.
  bool asked_to_stop = false;
  // Ended while awaiting the next attempt: STATUS is the last attempt's, its end recorded already.
  bool between_attempts = false;
};

// END is the command's own: it exited, or died of a signal not sent for a reason of rlock's.
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
  // Until AT, no command running: the run's end if a signal, a stop request, the loss or --max-run
  // ends it first, told as LAST ended; nothing at AT. The lease is renewed meanwhile; rlock keeps
  // the terminal. LAST_GROUP (the last attempt's, maybe never run) reaps its leftovers as they end.
  std::optional<AttemptEnd> wait_until(TimePoint at, const AttemptEnd& last,
                                       ProcessGroup& last_group);

  // The lease was lost (also under --on-lost ignore, when the command ran on).
  bool lost() const { return lost_; }

  // What the run is doing, for status (run_phase.h): the renewal thread carries it at once
  // (started now if it was not yet). watch() says "running" again; a stop says "stopping" itself.
  void announce(const RunPhase& phase);

private:
  struct Stopping {
    RunEnd why;
    TimePoint kill_at;  // SIGKILL to the group at this point
    TimePoint since;    // the first signal
  };
  struct Attempt {
    Attempt(ProcessGroup& g, Millis first_poll) : group(&g), group_poll(first_poll) {}
    ProcessGroup* group;
    std::optional<int> status;  // once the command has exited
    bool signalled = false;
    std::optional<Stopping> stopping;
    std::optional<TimePoint> killed_at;
    bool leftovers_found = false;
    Millis group_poll;
    // Not rlock's child, asked to stop under --on-lost ignore: left running without the lock.
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
  bool stopping() const { return attempt_ ? attempt_->stopping.has_value() : ends_as_.has_value(); }

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
  std::optional<Attempt> attempt_;  // the attempt being watched; none between attempts
  std::optional<RunEnd> ends_as_;   // between attempts: the run's end (a stop, the loss, --max-run)
};

}  // namespace rlock
