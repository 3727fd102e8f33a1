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
};

// What the supervisor watches. TERMINAL, HEARTBEAT and STOPS may be null: no controlling
// terminal, no --heartbeat-file, no listener for stop requests.
struct Supervised {
  Child& child;
  LeaseKeeper& keeper;
  SignalEvents& signals;
  Terminal* terminal;
  Heartbeat* heartbeat;
  StopListener* stops;
};

// Watches until the command's whole process group has ended: the command, and whatever it left
// running there (flock(1) keeps its lock while any process that inherited it lives), which
// --leftovers kill stops instead. STARTED: when the lock was taken (--max-run counts from it).
Outcome supervise_command(const RunOptions& options, const Supervised& what, TimePoint started);

}  // namespace rlock
