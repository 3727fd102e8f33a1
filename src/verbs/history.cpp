// rlock history KEY: the latest runs of a key, from its history stream (history.h).
#include "history.h"

#include "output.h"
#include "verbs/verbs.h"

namespace rlock {

int history_verb(const GlobalOptions& global, const std::string& key, int count, bool json) {
  auto redis = connect_redis(global);
  auto runs = read_history(*redis, key, count, Clock::now() + redis->command_timeout());
  if (!runs) return unavailable(runs.failure());
  print_history(key, *runs, output_style(json));
  return k_exit_ok;
}

}  // namespace rlock
