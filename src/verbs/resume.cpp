// rlock resume KEY: end KEY's pause (pause.h) before its time.
#include "lock/history.h"
#include "lock/pause.h"
#include "print/print.h"
#include "util/log.h"
#include "verbs/command.h"
#include "verbs/verbs.h"

namespace rlock {

int resume_verb(const GlobalOptions& global, const RunOptions& run, const std::string& key,
                const std::string& reason) {
  auto redis = connect_redis(global);
  auto was = resume_lock(*redis, key, Clock::now() + redis->command_timeout());
  if (!was) return unavailable(was.failure());
  if (!*was) {
    write_stdout(printable_key(key) + ": not paused; nothing changed\n");
    return k_exit_not_held;
  }
  write_stdout(printable_key(key) + ": resumed; it was " + pause_text(**was, Millis(-1)) + "\n");
  record_action(*redis, key, action_entry(RunEnd::resume, reason), run.history_length,
                run.retention);
  return k_exit_ok;
}

namespace {

struct ResumeArgs : Arguments {
  std::string key;
  std::optional<std::string> reason;
  int run(const Invocation& in) override {
    return resume_verb(in.resolved.global, in.resolved.run, in.key(key), reason_argument(reason));
  }
};

constexpr Option k_options[] = {
    option<&ResumeArgs::key>("KEY", k_key_help).must(),
    option<&ResumeArgs::reason>("--reason", "why, for the history and watch", "TEXT")};

}  // namespace

constexpr Command k_resume_command = {
    "resume",
    "end KEY's pause",
    "KEY [--reason TEXT]",
    {k_options, k_output, k_connection},
    "The first run waiting for KEY (--wait) is woken; who resumed it, and why, is in its\n"
    "history.\n"
    "Examples:\n"
    "  rlock resume lock:daily-report\n"
    "Exit status: 0 resumed, 1 not paused (nothing changed), 69 Redis unreachable; 64 usage, "
    "78 configuration, 125 rlock failed.",
    make_arguments<ResumeArgs>};

}  // namespace rlock
