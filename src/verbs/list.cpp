// rlock list [PATTERN]: every lock under the prefix, found with SCAN.
#include "lock_state.h"
#include "output.h"
#include "verbs/verbs.h"

namespace rlock {

int list_verb(const GlobalOptions& global, const std::string& pattern, bool json) {
  auto redis = connect_redis(global);
  auto locks = scan_locks(*redis, global.prefix + pattern);
  if (!locks) return unavailable(locks.failure());
  print_locks(*locks, output_style(json));
  return k_exit_ok;
}

}  // namespace rlock
