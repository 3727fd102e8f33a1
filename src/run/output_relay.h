// rlock run --keep-output SIZE: the command's output through rlock's capture
// (process/output_capture.h) to the sender that sends it to Redis (lock/kept_output.h), and
// what the run says of it: what was left to a terminal, what Redis did not get.
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

// Once rlock is asked to stop (a signal that ends it, Ctrl-C, rlock stop), how long a reader that
// does not take the command's output may still hold the run: then what is left is dropped, said,
// and the lock given back (rlock(1) --keep-output).
inline constexpr Millis k_stop_grace{500};
// How long the next attempt (--retry) waits at most for the capture to read the last one's
// output before its mark: only a reader of rlock's output that does not read holds it up.
inline constexpr Millis k_mark_patience{100};

class OutputRelay {
public:
  // The capture for OPTIONS, for the run of FENCE with lock value VALUE, its thread started
  // and SPEC's stdout and stderr sent to its pipes; CONNECT makes the sender's connection, on
  // its thread. Nothing without --keep-output, when stdout and stderr are both terminals, or
  // when the capture cannot start (each said): the command then runs without it.
  static std::unique_ptr<OutputRelay> make(const RunOptions& options, OutputSender::Connect connect,
                                           int64_t fence, const std::string& value,
                                           Child::Spec& spec);

  // The command has started: the sender sends. KEEP_PIPES: more attempts of the command may
  // follow (--retry), the pipes stay open for them until drain().
  void spawned(bool keep_pipes);
  // Attempt ATTEMPT of the command (--retry) is about to start, at the server's SINCE_MS when
  // known (its history entry's): its mark goes between the last attempt's output and its own
  // (rlock logs shows it), for which the capture reads what the pipes hold first, for
  // k_mark_patience at most.
  void next_attempt(int attempt, std::optional<int64_t> since_ms);
  // The command's group is done: the rest of its output is written on (OutputCapture::drain,
  // as patient as --kill-after; once ASKED_TO_STOP says so, for k_stop_grace more at most);
  // what was dropped is said.
  void drain(const std::function<bool()>& asked_to_stop);
  // The run ended as END with exit status STATUS: the output's end is sent within BUDGET; what
  // Redis did not get is said.
  void send_end(const std::string& end, int status, Millis budget);

  OutputRelay(const RunOptions& options, std::shared_ptr<OutputSender> sender);

private:
  const RunOptions& options_;
  // Shared with the capture's thread, which hands it every byte (and may outlive the run).
  std::shared_ptr<OutputSender> sender_;
  bool keeping_ = false;  // its thread runs
  OutputCapture capture_;
};

}  // namespace rlock
