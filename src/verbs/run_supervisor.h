// rlock run's watch over a running command: its process group, the lease, --max-run, the
// heartbeat, signals, job control and stop requests, until the group has ended.
#pragma once

#include <optional>

#include "lock/stop_request.h"
#include "util/clock.h"

namespace rlock {

class Child;
class Heartbeat;
class LeaseKeeper;
class SignalEvents;
class Terminal;
struct RunOptions;

// Why the command's group ended, as far as rlock had a part in it.
enum class End { exited, lost, max_run, hung, stopped };

struct Outcome {
  End end;
  int child_status;
  bool signalled;  // the command died of a signal (child_status 128+N); an exit(N) is not
  std::optional<StopRequest> stop;  // End::stopped: who asked, and why
  // --retry: the run ended after one attempt had ended and before the next began (a signal,
  // a stop, the loss, --max-run); CHILD_STATUS is the last attempt's.
  bool between_attempts = false;
  // rlock was asked to stop: a signal that ends a process, Ctrl-C in the command's terminal
  // (its death by SIGINT or SIGQUIT), rlock stop. What is left of the run is not waited for.
  bool asked_to_stop = false;
};

// --retry: what the supervisor asks of the run to start the command again, under the same
// lock and lease.
class Attempts {
public:
  virtual ~Attempts() = default;
  // The attempt that ended as END (End::exited, not after a signal rlock forwarded) is to be
  // followed by another after the returned delay (its end recorded), or is the last: nothing
  // (also when its end could not be recorded: the run's end records it).
  virtual std::optional<Millis> again(const Outcome& end) = 0;
  // Whether the lock is still ours as the next attempt is due (one look at Redis: a loss the
  // renewals have not met yet, --on-lost ignore's too); true when Redis does not say.
  virtual bool still_held() = 0;
  // Starts the next attempt: its command (exec_problem() set when it could not run), or null
  // when rlock could not start it (said): the run then ends as the last attempt did.
  virtual Child* start_next() = 0;
};

// What the supervisor watches. TERMINAL, HEARTBEAT, STOPS and ATTEMPTS may be null: no controlling
// terminal, no --heartbeat-file, no listener for stop requests.
struct Supervised {
  Child& child;
  LeaseKeeper& keeper;
  SignalEvents& signals;
  Terminal* terminal;
  Heartbeat* heartbeat;
  StopListener* stops;
  Attempts* attempts;  // null: one attempt
};

// Watches until the command's whole process group has ended: the command, and whatever it left
// running there (flock(1) keeps its lock while any process that inherited it lives), which
// --leftovers kill stops instead. STARTED: when the lock was taken (--max-run counts from it).
Outcome supervise_command(const RunOptions& options, const Supervised& what, TimePoint started);

}  // namespace rlock
