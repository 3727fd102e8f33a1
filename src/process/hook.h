// A command rlock runs for itself once a run is over (rlock run --notify): `/bin/sh -c TEXT`
// in a process group of its own, so that all it started can be stopped; its stdin /dev/null,
// its stdout rlock's stderr (rlock's stdout is the job's); KILLed at its deadline, or at once
// when rlock is asked to stop. Knows nothing of Redis nor of runs.
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
// out, for at most TIMEOUT. SIGNALS: rlock's (signals.h), read while it waits.
HookEnd run_hook(const std::string& text, const std::vector<std::string>& env,
                 const std::vector<std::string>& unset, Millis timeout, SignalEvents& signals);

}  // namespace rlock
