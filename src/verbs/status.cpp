// rlock status KEY...: one line per key: free, or held by whom, for how long, until when.
#include "lock_state.h"
#include "output.h"
#include "verbs/verbs.h"

namespace rlock {

int status_verb(const GlobalOptions& global, const std::vector<std::string>& keys, bool json) {
  auto redis = connect_redis(global);
  auto locks = read_locks(*redis, keys);
  if (!locks) return unavailable(locks.failure());
  print_locks(*locks, output_style(json));
  int status = k_exit_ok;
  for (const LockState& s : *locks) {
    if (s.kind == LockState::Kind::not_a_lock) return k_exit_unavailable;
    if (s.kind == LockState::Kind::free) status = k_exit_not_held;
  }
  return status;
}

}  // namespace rlock
