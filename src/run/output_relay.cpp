#include "run/output_relay.h"

#include <system_error>

#include "util/byte_size.h"
#include "util/log.h"

namespace rlock {

OutputRelay::OutputRelay(const RunOptions& options, std::shared_ptr<OutputSender> sender)
    : options_(options), sender_(std::move(sender)),
      capture_([sender = sender_](int stream, std::string_view bytes) {
        sender->take(stream, bytes);
      }) {}

namespace {

void warn_not_kept(const RunOptions& options, const std::system_error& e) {
  log(Level::warning, {"keep_output", options.key,
                       std::string("cannot keep the command's output (") + e.what() + ")"});
}

}  // namespace

std::unique_ptr<OutputRelay> OutputRelay::make(const RunOptions& options,
                                               OutputSender::Connect connect, int64_t fence,
                                               const std::string& value, Child::Spec& spec) {
  if (options.keep_output == 0) return nullptr;
  std::unique_ptr<OutputRelay> out;
  // Without descriptors for its pipes (ulimit -n) the job runs all the same, its output going
  // where it goes: what cannot be kept costs the keeping, not the job.
  try {
    out = std::make_unique<OutputRelay>(
        options, std::make_shared<OutputSender>(std::move(connect), options.key, fence, value,
                                                options.keep_output, options.retention));
  } catch (const Error& e) {
    log(Level::warning,
        {"keep_output", options.key, std::string(e.what()) + "; the command's output is not kept"});
    return nullptr;
  }
  const OutputCapture& c = out->capture_;
  bool out_tty = c.terminal(1), err_tty = c.terminal(2);
  if (out_tty || err_tty) {
    bool none = c.command_fd(1) < 0 && c.command_fd(2) < 0;
    const char* which = !err_tty ? "stdout is" : !out_tty ? "stderr is" : "stdout and stderr are";
    const char* kept = none ? "nothing" : out_tty ? "only stderr" : "only stdout";
    log(Level::info, {"keep_output", options.key,
                      std::string("--keep-output: ") + which +
                          " a terminal, left to the command: " + kept + " is kept"});
    if (none) return nullptr;
  }
  try {
    out->capture_.start();
  } catch (const std::system_error& e) {
    warn_not_kept(options, e);
    return nullptr;
  }
  spec.stdout_fd = c.command_fd(1);
  spec.stderr_fd = c.command_fd(2);
  return out;
}

void OutputRelay::spawned(bool keep_pipes) {
  if (!keep_pipes) capture_.spawned();
  // Without a thread (ulimit -u) the output still goes where it goes: only the keeping is lost.
  try {
    sender_->start();
    keeping_ = true;
  } catch (const std::system_error& e) {
    warn_not_kept(options_, e);
  }
}

void OutputRelay::next_attempt(int attempt, std::optional<int64_t> since_ms) {
  if (!keeping_) return;
  capture_.mark([sender = sender_, attempt, since_ms] { sender->mark_attempt(attempt, since_ms); },
                k_mark_patience);
}

void OutputRelay::drain(const std::function<bool()>& asked_to_stop) {
  bool asked = false;
  uint64_t dropped = capture_.drain(options_.kill_after, k_stop_grace, [&] {
    asked = asked || asked_to_stop();
    return asked;
  });
  auto warn = [&](std::string text) {
    log(Level::warning, {"output_dropped", options_.key, std::move(text)});
  };
  if (dropped == OutputCapture::k_unknown_dropped)
    warn("a write of the command's output did not return (a file system that hangs?); the rest "
         "of it was left");
  else if (dropped > 0 && asked)
    warn(format_byte_size(dropped) +
         " of the command's output were dropped: rlock was asked to stop, and the reader did not "
         "take them within " +
         format_duration(k_stop_grace));
  else if (dropped > 0)
    warn(format_byte_size(dropped) +
         " of the command's output could not be written on (a write failed, or nothing moved for " +
         format_duration(options_.kill_after) + ") and were dropped");
}

void OutputRelay::send_end(const std::string& end, int status, Millis budget) {
  if (!keeping_) return;
  OutputSender::Report r = sender_->send_end(end, status, Clock::now() + budget);
  std::string kept = format_byte_size(std::min(r.total, options_.keep_output));
  std::string why = r.failure.empty() ? "" : " (" + r.failure + ")";
  auto warn = [&](std::string text) {
    log(Level::warning, {"keep_output", options_.key, std::move(text)});
  };
  using Unkept = OutputSender::Report::Unkept;
  if (r.no_longer_kept == Unkept::pushed_out)
    warn("the command's output is no longer kept: " + std::to_string(k_kept_runs) +
         " newer runs pushed this run out");
  else if (r.no_longer_kept == Unkept::index_gone)
    warn("the command's output is no longer kept: " +
         (options_.retention.count() > 0 && Clock::now() - started_ >= options_.retention
              ? "the index of kept runs is gone: the run outlived --retention (" +
                    format_duration(options_.retention) + ") without output, or Redis lost it"
              : std::string("Redis lost the run's output (a restart without its data, a failover "
                            "to a replica that did not have it, or FLUSHALL)")));
  else if (r.unkept > 0)
    warn("Redis did not take the end of the command's output" + why + ": " +
         format_byte_size(r.unkept) + " of its last " + kept + " are not kept");
  else if (!r.end_kept)
    warn("Redis did not take the end of the run's output" + why +
         ": all of it is kept, but rlock logs cannot say how it ended");
  else if (r.missed > 0)
    warn("Redis was slow or away" + why + ": " + format_byte_size(r.missed) +
         " of the command's output were never sent, and rlock logs -f did not show them; "
         "its last " +
         kept + " are kept");
}

}  // namespace rlock
