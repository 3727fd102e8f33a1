// rlock list [PATTERN]: every lock under the prefix, found with SCAN, printed as it is read.
#include "lock/lock_state.h"
#include "output/output.h"
#include "verbs/command.h"
#include "verbs/verbs.h"

namespace rlock {

int list_verb(const GlobalOptions& global, const std::string& pattern, bool json, bool all) {
  auto redis = connect_redis(global);
  auto found = find_locks(*redis, global.prefix + pattern, all);
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

namespace {

struct ListArgs : Arguments {
  std::string pattern = "*";
  bool json = false;
  bool all = false;

  int run(const Invocation& in) override {
    return list_verb(in.resolved.global, pattern, json, all);
  }
};

constexpr Option k_options[] = {
    option<&ListArgs::pattern>("PATTERN", "a Redis glob after --prefix (default *)"),
    option<&ListArgs::json>("--json", k_json_help),
    option<&ListArgs::all>("--all",
                           "free locks too, those with a history (their last run) or a pause")};

}  // namespace

constexpr Command k_list_command = {
    "list",
    "every lock under the prefix that matches PATTERN",
    "[PATTERN] [--all]",
    {k_options, k_connection},
    "Exit status: 0, also when no lock matches; 69 Redis unreachable; 64 usage, "
    "78 configuration, 125 rlock failed.",
    make_arguments<ListArgs>};

}  // namespace rlock
