// rlock inspect KEY: everything known about one lock.
#include "lock/lock_state.h"
#include "print/print.h"
#include "verbs/command.h"
#include "verbs/verbs.h"

namespace rlock {

int inspect_verb(const GlobalOptions& global, const std::string& key, bool json) {
  auto redis = connect_redis(global);
  auto locks = read_locks(*redis, {key}, Unknown::shown);
  if (!locks) return unavailable(locks.failure());
  warn_wrong_types(*locks);
  warn_unanswered(*locks);
  const LockState& s = locks->front();
  print_inspect(s, output_style(json));
  if (s.kind == LockState::Kind::not_a_lock || !s.votes.known) return k_exit_unavailable;
  return s.kind == LockState::Kind::free ? k_exit_not_held : k_exit_ok;
}

namespace {

struct InspectArgs : Arguments {
  std::string key;
  bool json = false;

  int run(const Invocation& in) override {
    return inspect_verb(in.resolved.global, in.key(key), json);
  }
};

constexpr Option k_options[] = {option<&InspectArgs::key>("KEY", k_key_help).must(),
                                option<&InspectArgs::json>("--json", k_json_help)};

}  // namespace

constexpr Command k_inspect_command = {
    "inspect",
    "everything known about one lock",
    "KEY",
    {k_options, k_output, k_connection},
    "Examples:\n"
    "  rlock inspect lock:daily-report\n"
    "Exit status: 0 held, 1 free, 69 Redis unreachable, not a lock, or a state Redlock's "
    "nodes that answered cannot tell; 64 usage, 78 configuration, 125 rlock failed.",
    make_arguments<InspectArgs>};

}  // namespace rlock
