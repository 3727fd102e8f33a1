// rlock list [PATTERN]: every lock under the prefix, found with SCAN, printed as it is read.
#include "lock_state.h"
#include "output.h"
#include "verbs/verbs.h"

namespace rlock {

int list_verb(const GlobalOptions& global, const std::string& pattern, bool json) {
  auto redis = connect_redis(global);
  auto found = find_locks(*redis, global.prefix + pattern);
  if (!found) return unavailable(found.failure());
  LockPrinter printer(output_style(json));
  for (const FoundLock& f : found->locks) printer.fit(f.key);
  auto read =
      read_found_locks(*found, [&](const std::vector<LockState>& batch) { printer.print(batch); });
  // What was printed stands; the rest is missing (and the JSON document unfinished).
  if (!read) return unavailable(read.failure());
  printer.finish();
  return k_exit_ok;
}

}  // namespace rlock
