// rlock inspect KEY: everything known about one lock.
#include "lock_state.h"
#include "output.h"
#include "verbs/verbs.h"

namespace rlock {

int inspect_verb(const GlobalOptions& global, const std::string& key, bool json) {
  auto redis = connect_redis(global);
  auto locks = read_locks(*redis, {key});
  if (!locks) return unavailable(locks.failure());
  const LockState& s = locks->front();
  print_inspect(s, output_style(json));
  if (s.kind == LockState::Kind::not_a_lock) return k_exit_unavailable;
  return s.kind == LockState::Kind::free ? k_exit_not_held : k_exit_ok;
}

}  // namespace rlock
