// rlock check KEY --every PERIOD: the dead-man's switch of a fleet's job: 0 when a run of KEY
// succeeded within the period, else 1 with one line saying what the last runs were (check.h).
#include "check.h"

#include "log.h"
#include "output.h"
#include "verbs/verbs.h"

namespace rlock {

int check_verb(const GlobalOptions& global, const CheckOptions& options) {
  auto redis = connect_redis(global);
  auto result = check_runs(*redis, options.key, options.every, options.tz,
                           Clock::now() + redis->command_timeout());
  if (!result) return unavailable(result.failure());
  // -q: a monitoring cron mails only what went wrong.
  if (!result->ok() || options.json || verbosity() != Verbosity::quiet)
    print_check(options, *result, output_style(options.json));
  return result->ok() ? k_exit_ok : k_exit_not_held;
}

}  // namespace rlock
