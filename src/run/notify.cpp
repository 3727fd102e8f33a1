#include "run/notify.h"

#include <fcntl.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "lock/check.h"
#include "lock/kept_output.h"
#include "process/hook.h"
#include "redis/redis.h"
#include "run/command.h"
#include "util/fd.h"
#include "util/log.h"

namespace rlock {

namespace {

// The most history entries read to count the fleet's failures: RLOCK_FAILURES counts no further.
constexpr int k_failures_read = 1000;
// Entries of kept output read at once for RLOCK_OUTPUT_FILE.
constexpr size_t k_output_read = 1024;
// RLOCK_OUTPUT_FILE's descriptor is the first free one from here: above those a shell script
// numbers itself (`exec 3>log`), which would take the file's place.
constexpr int k_output_fd_from = 10;

bool ran(const std::string& result) {
  return result != "busy" && result != "done" && result != "error";
}

void say(const std::string& key, const std::string& message) {
  log(Level::warning, {"notify", key, "--notify: " + message});
}

// The run's kept output (--keep-output) for RLOCK_OUTPUT_FILE, in a nameless file in memory
// (memfd_create: nothing another user could plant a link under, nothing left behind however rlock
// dies) that the hook inherits and opens as /dev/fd/N; invalid (said) when there is none to give.
Fd output_file(Redis& redis, const RunOptions& options, int64_t fence) {
  Fd made(::memfd_create("rlock-output", MFD_CLOEXEC));
  Fd file(made.valid() ? ::fcntl(made.get(), F_DUPFD_CLOEXEC, k_output_fd_from) : -1);
  if (!file.valid()) {
    say(options.key, std::string("no file for the kept output (") + std::strerror(errno) + ")");
    return Fd();
  }
  TimePoint deadline = Clock::now() + redis.command_timeout();
  OutputRead read;
  do {
    auto more = read_output(redis, options.key, fence, read.last_id, k_output_read, deadline);
    if (!more) {
      say(options.key, "the kept output could not be read (" + more.failure().message +
                           "); RLOCK_OUTPUT_FILE has what was");
      break;
    }
    read = std::move(*more);
    for (const OutputPiece& piece : read.pieces)
      if (!write_all(file.get(), piece.bytes.data(), piece.bytes.size())) {
        say(options.key,
            std::string("the kept output could not be written: ") + std::strerror(errno));
        return Fd();
      }
  } while (read.pieces.size() + (read.end ? 1 : 0) == k_output_read);
  return file;
}

// The fleet's failures in a row before the run with FENCE, from every host's entries in the
// history (none before it without a history); nothing when it could not be read (said).
std::optional<int> fleet_failures(Redis& redis, const RunOptions& options, int64_t fence) {
  if (options.history_length == 0) return 0;
  auto history = read_history(redis, options.key, std::min(options.history_length, k_failures_read),
                              Clock::now() + redis.command_timeout());
  if (history) return failures_before(history->runs, fence);
  say(options.key, "the fleet's failures could not be counted (" + history.failure().message + ")");
  return std::nullopt;
}

void say_hook_end(const RunOptions& options, const HookEnd& end) {
  switch (end.kind) {
  case HookEnd::Kind::exited:
    if (end.status != 0)
      say(options.key, "its command exited with status " + std::to_string(end.status));
    break;
  case HookEnd::Kind::timed_out:
    say(options.key, "its command was still running after " +
                         format_duration(options.notify_timeout) + " (--notify-timeout); killed");
    break;
  case HookEnd::Kind::interrupted:
    say(options.key, "its command was killed: rlock was asked to stop");
    break;
  case HookEnd::Kind::not_started:
    say(options.key, "its command could not start (" + end.problem + ")");
    break;
  }
}

}  // namespace

bool worth_telling(const RunOptions& options, const std::string& result,
                   std::optional<int> before) {
  using On = RunOptions::NotifyOn;
  if (options.notify_on == On::always) return true;
  if (!ran(result)) return false;
  bool failed = result != "success";
  // Without the count only what needs none is told: each failure.
  if (!before) return failed && options.notify_on == On::failure && options.notify_after <= 1;
  int failures = failed ? *before + 1 : 0;
  if (options.notify_on == On::failure) return failed && failures >= options.notify_after;
  // change: the fleet starts failing (its Nth failure in a row), or recovers from that.
  return failed ? failures == options.notify_after : *before >= options.notify_after;
}

void notify(const RunOptions& options, Redis* redis, const RunReport& report,
            SignalEvents& signals) try {
  if (!options.notify) return;
  const std::string result = report.result();
  bool failed = ran(result) && result != "success";
  // The fleet's failures are read for what ran, but for a success that --notify-on failure ignores.
  std::optional<int> before;
  if (redis && ran(result) && (failed || options.notify_on != RunOptions::NotifyOn::failure))
    before = fleet_failures(*redis, options, report.fence);
  if (!worth_telling(options, result, before)) return;

  std::vector<std::string> env{"RLOCK_KEY=" + options.key, "RLOCK_RESULT=" + result,
                               "RLOCK_EXIT_STATUS=" + std::to_string(report.exit_status),
                               "RLOCK_DURATION_MS=" + std::to_string(report.duration.count()),
                               "RLOCK_HOST=" + report.host};
  // What this run does not say is not left as an outer rlock set it either.
  std::vector<std::string> unset{"RLOCK_TOKEN", "RLOCK_TTL_MS", "RLOCK_HEARTBEAT_FILE"};
  auto set = [&](const char* name, bool given, const std::string& value) {
    if (given)
      env.push_back(name + ("=" + value));
    else
      unset.push_back(name);
  };
  set("RLOCK_FENCE", report.fence > 0, std::to_string(report.fence));
  set("RLOCK_FAILURES", before.has_value(), std::to_string(failed ? before.value_or(0) + 1 : 0));
  set("RLOCK_ATTEMPT", report.attempt > 0, std::to_string(report.attempt));
  set("RLOCK_RECORDED", report.fence > 0 && options.history_length > 0,
      report.recorded ? "1" : "0");
  Fd output;
  if (redis && options.keep_output > 0 && report.fence > 0)
    output = output_file(*redis, options, report.fence);
  set("RLOCK_OUTPUT_FILE", output.valid(), "/dev/fd/" + std::to_string(output.get()));
  // The hook gets no Redis secret of rlock's, redis-cli's either: it talks to the outside.
  keep_secrets(env, unset, false);

  log(Level::debug, {"notify", options.key, "--notify: running its command (" + result + ")"});
  say_hook_end(options, run_hook(*options.notify, env, unset, output.get(), options.notify_timeout,
                                 signals));
} catch (const std::exception& e) {  // out of memory, say: never the job's exit status
  say(options.key, e.what());
}

}  // namespace rlock
