// Work that may hang in the kernel for ever (a write to a file system frozen with fsfreeze, a
// flock held by such a writer, an NFS server gone), done where it cannot hold rlock: in a
// forked process that rlock waits for only so long. A thread would not do: one stuck in an
// uninterruptible write keeps the whole process from exiting.
#pragma once

#include <functional>
#include <string>

#include "util/duration.h"

namespace rlock {

struct BoundedCall {
  enum class Outcome { returned, timed_out, not_started } outcome;
  std::string text;  // returned: what WORK returned; not_started: why (pipe2, fork)
};

// Runs WORK in a forked process and returns what it returned, unless it had not finished within
// BUDGET (it is then killed, and left to finish its system call: a process in uninterruptible
// sleep dies only when it wakes) or could not be started. WORK must not log or use threads;
// what it returns is cut at 4 KiB.
BoundedCall call_bounded(const std::function<std::string()>& work, Millis budget);

}  // namespace rlock
