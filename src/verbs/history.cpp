// rlock history KEY: the latest runs of a key, from its history stream (history.h).
#include "history.h"

#include "log.h"
#include "output.h"
#include "verbs/verbs.h"

namespace rlock {

int history_verb(const GlobalOptions& global, const std::string& key, int count, bool json) {
  auto redis = connect_redis(global);
  auto read = read_history(*redis, key, count, Clock::now() + redis->command_timeout());
  if (!read) return unavailable(read.failure());
  for (const std::string& node : read->unanswered)
    log(Level::warning, {"history_incomplete", key,
                         "no answer from " + node + ": the runs recorded there are not shown"});
  print_history(key, read->runs, output_style(json));
  return k_exit_ok;
}

}  // namespace rlock
