// rlock resume KEY: end KEY's pause (pause.h) before its time.
#include "lock/pause.h"
#include "output/output.h"
#include "util/log.h"
#include "verbs/command.h"
#include "verbs/verbs.h"

namespace rlock {

int resume_verb(const GlobalOptions& global, const std::string& key) {
  auto redis = connect_redis(global);
  auto was = resume_lock(*redis, key, Clock::now() + redis->command_timeout());
  if (!was) return unavailable(was.failure());
  if (!*was) {
    write_stdout(printable_key(key) + ": not paused; nothing changed\n");
    return k_exit_not_held;
  }
  write_stdout(printable_key(key) + ": resumed; it was " + pause_text(**was, Millis(-1)) + "\n");
  return k_exit_ok;
}

namespace {

struct ResumeArgs : Arguments {
  std::string key;
  int run(const Invocation& in) override { return resume_verb(in.resolved.global, in.key(key)); }
};

constexpr Option k_options[] = {option<&ResumeArgs::key>("KEY", k_key_help).must()};

}  // namespace

constexpr Command k_resume_command = {
    "resume",
    "end KEY's pause",
    "KEY",
    {k_options, k_connection},
    "The first run waiting for KEY (--wait) is woken.\n"
    "Exit status: 0 resumed, 1 not paused (nothing changed), 69 Redis unreachable; 64 usage, "
    "78 configuration, 125 rlock failed.",
    make_arguments<ResumeArgs>};

}  // namespace rlock
