// rlock run --keep-output SIZE: the command's output through rlock's capture to Redis (README.md).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "lock/kept_output.h"
#include "process/child.h"
#include "process/output_capture.h"
#include "settings/options.h"

namespace rlock {

// How long, once rlock is asked to stop, a reader not taking the command's output may still hold
// the run; then the rest is dropped, said, and the lock given back (rlock-run(1), --keep-output).
inline constexpr Millis k_stop_grace{500};
// How long the next attempt (--retry) waits at most for the capture to read the last one's
// output before its mark: only a reader of rlock's output that does not read holds it up.
inline constexpr Millis k_mark_patience{100};

class OutputRelay {
public:
  // The capture for OPTIONS and the run of FENCE with lock value VALUE, its thread started and
  // SPEC's stdout and stderr sent to its pipes; CONNECT makes the sender's connection, on its
  // thread. Null without --keep-output, or when stdout and stderr are both terminals or the capture
  // cannot start (said): the command then runs without it.
  static std::unique_ptr<OutputRelay> make(const RunOptions& options, OutputSender::Connect connect,
                                           int64_t fence, const std::string& value,
                                           Child::Spec& spec);

  // The command has started: the sender sends. KEEP_PIPES: more attempts may follow (--retry),
  // so the pipes stay open for them until drain().
  void spawned(bool keep_pipes);
  // Attempt ATTEMPT (--retry) is about to start, at the server's SINCE_MS when known: its mark
  // goes between the last attempt's output and its own (rlock logs shows it), once the capture has
  // read what the pipes hold, for k_mark_patience at most.
  void next_attempt(int attempt, std::optional<int64_t> since_ms);
  // The command's group is done: the rest of its output is written on (OutputCapture::drain, as
  // patient as --kill-after; once ASKED_TO_STOP, for k_stop_grace more at most); drops are said.
  void drain(const std::function<bool()>& asked_to_stop);
  // The run ended as END, exit status STATUS: the output's end is sent within BUDGET, losses said.
  void send_end(const std::string& end, int status, Millis budget);

  OutputRelay(const RunOptions& options, std::shared_ptr<OutputSender> sender);

private:
  const RunOptions& options_;
  // Shared with the capture's thread, which hands it every byte (and may outlive the run).
  std::shared_ptr<OutputSender> sender_;
  bool keeping_ = false;              // its thread runs
  TimePoint started_ = Clock::now();  // to tell an index that expired from one Redis lost
  OutputCapture capture_;
};

}  // namespace rlock
