// rlock reset-period KEY --once-per PERIOD: lets a --once-per job run again this period, by
// forgetting the period's run (recorded in the history, so the next reader knows why).
#include "lock/history.h"
#include "print/print.h"
#include "util/log.h"
#include "verbs/command.h"
#include "verbs/verbs.h"

namespace rlock {

int reset_period_verb(const GlobalOptions& global, const RunOptions& options,
                      const std::string& reason) {
  if (!options.once_per)
    throw usage_error("reset-period needs --once-per PERIOD, as the job's rlock run gives it");
  auto redis = connect_redis(global);
  check_topology(*redis, options);
  auto reset = reset_period(*redis, options.key, *options.once_per, options.tz,
                            Clock::now() + redis->command_timeout());
  if (!reset) return unavailable(reset.failure());
  const SlotClaim& run = reset->run;
  switch (reset->outcome) {
  case PeriodReset::Outcome::no_run:  // nothing to do, as release --force of a free lock
    write_stdout(printable_key(options.key) + ": no run recorded for this period (" + reset->slot +
                 "); nothing changed\n");
    return k_exit_not_held;
  case PeriodReset::Outcome::still_running:
    log_error(options.key + ": this period's run (" + reset->slot + ") is still running on " +
              run.host + " since " + run.since + "; nothing changed");
    return k_exit_not_held;
  case PeriodReset::Outcome::forgotten: break;
  }
  RunRecord entry = action_entry(RunEnd::period_reset, reason);
  entry.period = reset->slot;
  record_action(*redis, options.key, entry, options.history_length, options.retention);
  write_stdout(printable_key(options.key) + ": forgot this period's run (" +
               printable(reset->slot) + ", on " + printable(run.host) + " at " +
               printable(run.since) + ": " + printable(period_run_text(run), 200) +
               "); the next rlock run --once-per runs the job\n");
  return k_exit_ok;
}

namespace {

struct ResetPeriodArgs : Arguments {
  std::string key;
  std::optional<std::string> reason;

  int run(const Invocation& in) override {
    in.resolved.run.key = in.key(key);
    return reset_period_verb(in.resolved.global, in.resolved.run, reason_argument(reason));
  }
};

constexpr Option k_options[] = {
    option<&ResetPeriodArgs::key>("KEY", k_key_help).must(),
    setting("once-per", "the job's period: hour, day, week, month, or a duration (1h, 1d)"),
    option<&ResetPeriodArgs::reason>("--reason", "why, for the history and watch", "TEXT"),
    setting("tz"),
    setting("history-length"),
    setting("retention")};

}  // namespace

constexpr Command k_reset_period_command = {
    "reset-period",
    "let a --once-per job run again this period",
    "KEY --once-per PERIOD [--reason TEXT]",
    {k_options, k_output, k_connection},
    "Forgets this period's run of KEY (recorded in its history), so that the next\n"
    "rlock run --once-per runs the job. Give the --once-per and --tz of the job.\n"
    "Examples:\n"
    "  rlock reset-period lock:daily-report --once-per day\n"
    "Exit status: 0 forgotten, 1 no run this period or it is still running (nothing changed), "
    "69 Redis unreachable; 64 usage, 78 configuration, 125 rlock failed.",
    make_arguments<ResetPeriodArgs>};

}  // namespace rlock
