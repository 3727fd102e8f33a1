// Work that may hang in the kernel for ever (a write to a file system frozen with fsfreeze, a
// flock held by such a writer, an NFS server gone), done where it cannot hold rlock: in a
// forked process that rlock waits for only so long. A thread would not do: one stuck in an
// uninterruptible write keeps the whole process from exiting.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "util/duration.h"

namespace rlock {

// Runs WORK in a forked process and returns what it returned, or nullopt when it had not
// finished within BUDGET (it is then killed, and left to finish its system call: a process in
// uninterruptible sleep dies only when it wakes) or could not be started. WORK must not log or
// use threads; what it returns is at most 4 KiB.
std::optional<std::string> call_bounded(const std::function<std::string()>& work, Millis budget);

}  // namespace rlock
