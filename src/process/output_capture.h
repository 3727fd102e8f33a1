// The command's stdout and stderr on their way through rlock (rlock run --keep-output): each
// that is open and not a terminal becomes a pipe, which a thread of rlock's reads and writes on
// to where it went before (a file, cron's mail, the journal's socket), handing a copy of every
// byte to KEEP. Knows nothing of Redis.
//
// - The command meets the same backpressure as without rlock: a chunk is read only once the
//   last one was written on. A destination nobody reads stops the command, as it would have.
// - Nothing the thread does blocks on the destination (a pipe is written through a
//   non-blocking description of its own, a socket with MSG_DONTWAIT), so the end of a run
//   never hangs on one: drain() gives up once nothing moves, and says how much it dropped.
// - A destination that is gone (EPIPE: `| head`) closes the pipe, so that the command gets
//   SIGPIPE or EPIPE on its next write, as it would have. Other write errors (a full disk)
//   drop the chunk, counted, as the command's own write would have failed.
// - Only what a stream of bytes may take is captured: not a descriptor open for reading only
//   (a closed stdout that rlock holds on /dev/null), nor a datagram socket.
// - When stdout and stderr lead to the same place (2>&1, cron), they share one pipe: the order
//   of their bytes is exact. Otherwise each is its own pipe, in the order rlock reads them.
// - A terminal is left to the command (its colours, prompts and job control need it): nothing
//   of it is kept.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "util/background_thread.h"
#include "util/clock.h"
#include "util/duration.h"
#include "util/fd.h"

namespace rlock {

class OutputCapture {
public:
  // STREAM 1 (stdout) or 2 (stderr; 1 when both share a pipe), and the bytes just read.
  using Keep = std::function<void(int stream, std::string_view bytes)>;

  // Looks at rlock's stdout and stderr and makes a pipe for each to capture. Throws Error
  // (resources.h) when it cannot.
  explicit OutputCapture(Keep keep);
  ~OutputCapture();
  OutputCapture(const OutputCapture&) = delete;
  OutputCapture& operator=(const OutputCapture&) = delete;

  // The command's end of the pipe for its stdout (1) or stderr (2); -1: not captured (closed,
  // or a terminal), the command gets rlock's.
  int command_fd(int stream) const;
  // Whether FD (1 or 2) is a terminal, left to the command.
  bool terminal(int stream) const;

  // Starts the thread, before the command: throws std::system_error when it cannot (the
  // command then starts without the capture).
  void start();
  // The command has started: the capture's copies of its pipe ends are closed, so that the
  // pipes end when the command and what it started are done.
  void spawned();
  // Before the next attempt of the command starts (--retry), its last attempt's group done:
  // calls AT on the capture's thread once it has read all that the pipes held, so that AT
  // falls between the two attempts' output. Waits for that up to PATIENCE (a reader that does
  // not take the output leaves bytes in the pipes), then calls AT itself: the bytes still in
  // the pipes then come after it. AT is called once.
  void mark(const std::function<void()>& at, Millis patience);

  // The command's process group is done. Writes on all that the command wrote before it ended,
  // however long its reader takes (as the command would have waited), and what else comes
  // within PATIENCE (a process it started outside its group may hold the pipes open, and
  // write); then gives up once nothing moved for PATIENCE, or GRACE after ASKED_TO_STOP first
  // says so (rlock was asked to stop: a signal, rlock stop; looked at every 50 ms). Returns
  // what it dropped: bytes it could not write on (a full disk) or not read when it gave up;
  // k_unknown_dropped when it was held up in a write that does not return (a file system that
  // hangs), and left to end by itself. Not to be called twice.
  uint64_t drain(Millis patience, Millis grace, const std::function<bool()>& asked_to_stop);
  static constexpr uint64_t k_unknown_dropped = UINT64_MAX;

  struct State;  // what the thread works with (output_capture.cpp)

private:
  std::shared_ptr<State> state_;
  BackgroundThread thread_;
};

}  // namespace rlock
