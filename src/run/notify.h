// rlock run --notify CMD (rlock-run(1), --notify): run after the release, to delay no other host.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "lock/history.h"
#include "settings/options.h"
#include "util/duration.h"

namespace rlock {

class Redis;
class SignalEvents;

// What rlock run did, as the notification's environment tells it.
struct RunReport {
  // How the run ended (busy, paused and done-this-period when the command did not run); none:
  // an error kept it from running (Redis failed us, or the command could not start).
  std::optional<RunEnd> end;
  int exit_status = 0;
  Millis duration{0};  // while the lock was held, every attempt's
  int64_t fence = 0;   // 0: the run took no lock
  std::string host;
  int attempt = 0;  // --retry: the number of the last attempt
  // RLOCK_RECORDED: false when Redis could not take the run's end (the history says "end unknown").
  bool recorded = true;

  // RLOCK_RESULT: run_result_name(), or error when an error kept the run from running.
  std::string result() const { return end ? run_result_name(*end, exit_status) : "error"; }
};

// Whether OPTIONS (--notify-on, --notify-after) tell of a run that ended as RESULT after BEFORE
// failures in a row across the fleet; BEFORE unknown (the history could not be read): only what
// needs no count (always, or each failure).
bool worth_telling(const RunOptions& options, const std::string& result, std::optional<int> before);

// Runs --notify's command for REPORT when OPTIONS say so, reading REDIS when the decision or the
// environment needs it (null: not asked, as for a command that cannot run). Its failure, hang or
// lack of a process is one warning, never the run's; a signal from SIGNALS (rlock's) stops it.
void notify(const RunOptions& options, Redis* redis, const RunReport& report,
            SignalEvents& signals);

}  // namespace rlock
