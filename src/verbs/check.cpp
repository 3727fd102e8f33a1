// rlock check KEY --every PERIOD: the dead-man's switch of a fleet's job: 0 when a run of KEY
// succeeded within the period, else 1 with one line saying what the last runs were (check.h).
#include "lock/check.h"

#include "print/print.h"
#include "util/log.h"
#include "verbs/command.h"
#include "verbs/verbs.h"

namespace rlock {

int check_verb(const GlobalOptions& global, const CheckOptions& options) {
  auto redis = connect_redis(global);
  auto result = check_runs(*redis, options.key, options.every, options.tz,
                           Clock::now() + redis->command_timeout());
  if (!result) return unavailable(result.failure());
  result->slower_than = options.slower_than;
  // -q: a monitoring cron mails only what went wrong.
  if (!result->ok() || options.json || verbosity() != Verbosity::quiet)
    print_check(options, *result, output_style(options.json));
  return result->ok() ? k_exit_ok : k_exit_not_held;
}

namespace {

struct CheckArgs : Arguments {
  std::string key;
  std::string every;
  std::optional<std::string> slower_than;
  bool json = false;

  // --every's period, or a usage error.
  Period every_period() const {
    auto period = parse_period(every);
    if (!period && duration_too_long(every))
      throw usage_error("--every '" + every + "' is too long: at most " +
                        format_duration(k_max_duration));
    if (!period)
      throw usage_error("--every '" + every + "' is neither hour, day, week, month nor a " +
                        "duration of whole seconds (25h, 1d, 90m ...)");
    return *period;
  }

  // --slower-than's duration, or a usage error.
  std::optional<Millis> slower_than_limit() const {
    if (!slower_than) return std::nullopt;
    auto d = parse_duration(*slower_than);
    if (!d && duration_too_long(*slower_than))
      throw usage_error("--slower-than '" + *slower_than + "' is too long: at most " +
                        format_duration(k_max_duration));
    if (!d || d->count() == 0)
      throw usage_error("--slower-than '" + *slower_than + "' is not a duration above zero " +
                        "(90m, 2h, 1h30m; a bare number is seconds)");
    return d;
  }

  void check_values() const override {
    if (!every.empty()) (void)every_period();
    (void)slower_than_limit();
  }
  void check(const std::vector<std::string>&) const override { (void)every_period(); }

  int run(const Invocation& in) override {
    return check_verb(in.resolved.global,
                      CheckOptions{in.key(key), every, every_period(), in.resolved.run.tz, json,
                                   slower_than_limit()});
  }
};

constexpr Option k_options[] = {
    option<&CheckArgs::key>("KEY", k_key_help).must(),
    option<&CheckArgs::every>("--every",
                              "a run must have succeeded within the last PERIOD: a duration "
                              "(25h), or the current hour, day, week or month (in --tz)",
                              "PERIOD")
        .must(),
    option<&CheckArgs::slower_than>("--slower-than",
                                    "also fail when the last success took longer than D (a job "
                                    "that still succeeds but has crept)",
                                    "D"),
    setting("tz", "time zone of --every's calendar periods (default UTC)"),
    option<&CheckArgs::json>("--json", k_json_help)};

}  // namespace

constexpr Command k_check_command = {
    "check",
    "whether a run of KEY succeeded within PERIOD (a dead-man's switch)",
    "KEY --every PERIOD",
    {k_options, k_output, k_connection},
    "A duration is the last PERIOD by the Redis server's clock; hour, day, week and\n"
    "month are the current one, as --once-per counts them: check late in the period,\n"
    "or give a duration with slack (--every 25h for a daily job). Prints one line\n"
    "on stdout, the first word after the key 'ok' when a run succeeded (-q: only when\n"
    "none did). Reads only.\n"
    "Examples:\n"
    "  rlock check lock:daily-report --every 25h\n"
    "  rlock check lock:backup --every day --slower-than 2h\n"
    "Exit status: 0 a run succeeded within PERIOD (within D with --slower-than), 1 none "
    "did (or none is recorded), "
    "69 Redis unreachable; 64 usage, 78 configuration, 125 rlock failed.",
    make_arguments<CheckArgs>};

}  // namespace rlock
