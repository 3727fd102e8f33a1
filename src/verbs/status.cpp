// rlock status KEY...: one line per key: free, or held by whom, for how long, until when.
#include "lock/lock_state.h"
#include "print/print.h"
#include "verbs/command.h"
#include "verbs/verbs.h"

namespace rlock {

int status_verb(const GlobalOptions& global, const std::vector<std::string>& keys, bool json) {
  auto redis = connect_redis(global);
  auto locks = read_locks(*redis, keys, Unknown::shown);
  if (!locks) return unavailable(locks.failure());
  warn_wrong_types(*locks);
  warn_unanswered(*locks);
  print_locks(*locks, output_style(json));
  int status = k_exit_ok;
  for (const LockState& s : *locks) {
    if (s.kind == LockState::Kind::not_a_lock || !s.votes.known) return k_exit_unavailable;
    if (s.kind == LockState::Kind::free) status = k_exit_not_held;
  }
  return status;
}

namespace {

struct StatusArgs : Arguments {
  std::vector<std::string> keys;
  bool json = false;

  int run(const Invocation& in) override {
    return status_verb(in.resolved.global, in.keys(keys), json);
  }
};

constexpr Option k_options[] = {option<&StatusArgs::keys>("KEY", k_keys_help).must(),
                                option<&StatusArgs::json>("--json", k_json_help)};

}  // namespace

constexpr Command k_status_command = {
    "status",
    "one line per key: free, or held by whom",
    "KEY...",
    {k_options, k_output, k_connection},
    "Examples:\n"
    "  rlock status lock:daily-report\n"
    "  rlock status --json lock:a lock:b\n"
    "Exit status: 0 every key held, 1 some key free, 69 Redis unreachable, a key that is "
    "not a lock, or one whose state Redlock's nodes that answered cannot tell; 64 usage, "
    "78 configuration, 125 rlock failed.",
    make_arguments<StatusArgs>};

}  // namespace rlock
