// A command rlock runs for itself once a run is over (rlock run --notify): `/bin/sh -c TEXT`
// as a Child (child.h), so in a process group of its own with a guardian that KILLs the group
// if rlock dies; its stdin /dev/null, its stdout rlock's stderr (rlock's stdout is the job's).
// Its group is KILLed when its shell ends, at its deadline, or at once when rlock is asked to
// stop: what the shell left running there would hold rlock's stderr open, and a `2>&1 | cat`
// or `$(rlock ...)` would wait for it. Knows nothing of Redis nor of runs.
#pragma once

#include <string>
#include <vector>

#include "util/duration.h"

namespace rlock {

class SignalEvents;

struct HookEnd {
  enum class Kind {
    exited,       // STATUS: its shell's exit status (128+N for death by signal N)
    timed_out,    // still running at the deadline: its group was KILLed
    interrupted,  // rlock was asked to stop (a signal that ends a process): KILLed
    not_started,  // PROBLEM says why (fork failed: ulimit -u, memory)
  } kind;
  int status = 0;
  std::string problem;
};

// Runs TEXT with our environment, ENV ("NAME=value") set in it and the names in UNSET taken
// out, for at most TIMEOUT. PASSED_FD (O_CLOEXEC), unless -1, stays open in the hook at its
// number. SIGNALS: rlock's (signals.h), read while it waits.
HookEnd run_hook(const std::string& text, const std::vector<std::string>& env,
                 const std::vector<std::string>& unset, int passed_fd, Millis timeout,
                 SignalEvents& signals);

}  // namespace rlock
