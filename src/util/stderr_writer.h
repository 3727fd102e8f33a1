// Everything rlock writes to stderr goes through one queue, which one thread of its own writes
// out. A stderr that nobody reads (a full pipe, a terminal stopped with Ctrl-S, a journald slow
// to drain, an ssh client that stopped reading) then blocks that thread alone: never a renewal,
// the handling of a signal or the end of a run (rlock-run(1) LOGS).
//
// A line that finds the queue full is dropped and counted; once stderr takes lines again, one
// line says how many were dropped. The command's own output is not rlock's and is not touched.
#pragma once

#include <string>

#include "util/duration.h"

namespace rlock {

// Queues TEXT (one or more whole lines, or a terminal's status line) for stderr. Never blocks.
void write_stderr(std::string text);

// Waits until what is queued has been written, giving up once nothing could be written for
// PATIENCE: rlock exits with its command, not when someone reads its stderr. True when all was
// written. Call before exit or exec (what is queued would be lost).
bool flush_stderr(Millis patience);
// Writes what is queued (as flush_stderr) and ends the writer thread, for a fork whose child
// starts threads of its own (the --while-pid keeper): a fork of a process with threads may not
// (ThreadSanitizer). The next line starts another. Leaves it running when stderr takes nothing.
void stop_stderr_writer(Millis patience);
// How long rlock waits for a stderr that takes nothing before it exits or execs all the same.
inline constexpr Millis k_exit_stderr_patience{1000};

}  // namespace rlock
