// rlock acquire KEY: take the lock for a script that cannot wrap a command; print the token.
// With --while-pid PID, leave a keeper that holds it for as long as PID lives (keeper.cpp).
#include <unistd.h>

#include "lock/lock.h"
#include "lock/lock_value.h"
#include "print/print.h"
#include "process/keeper_link.h"
#include "process/pid_watch.h"
#include "process/signals.h"
#include "run/keeper.h"
#include "run/wait.h"
#include "util/log.h"
#include "util/resources.h"
#include "verbs/command.h"
#include "verbs/verbs.h"

namespace rlock {

namespace {

// The descriptors the caller left open (a script's `exec 9>file` for flock) would live on in
// the keeper: close them before anything of ours is opened.
void close_inherited_descriptors() {
  if (::close_range(3, ~0U, 0) == 0) return;
  for (int fd = 3; fd < 1024; ++fd) ::close(fd);
}

}  // namespace

int acquire_verb(const GlobalOptions& global, const RunOptions& options, bool json,
                 std::optional<int> while_pid) {
  std::optional<PidWatch> pid;
  if (while_pid) {
    close_inherited_descriptors();
    pid = PidWatch::open(*while_pid);
    if (!pid) throw usage_error("--while-pid " + std::to_string(*while_pid) + ": no such process");
  }
  SignalEvents signals;  // a signal while waiting ends the wait, leaving nothing behind
  auto redis = connect_redis(global);
  check_topology(*redis, options);
  if (auto token = inherited_token(*redis, options)) {
    // Inside a command that holds KEY: that lock is ours already. Print its token.
    print_acquired(options.key, *token, 0, options.ttl, output_style(json));
    return k_exit_ok;
  }
  auto owned_lock = make_lock(*redis, options.key, make_token(), lock_mode(options));
  Lock& lock = *owned_lock;
  LockValue value{lock.token(), process_holder(pid ? pid->pid() : ::getppid()), std::nullopt,
                  options.ttl.count(), std::nullopt};
  // The keeper holds the lock for PID's group when PID leads one: say so, lest status call the
  // lock left over once PID alone has exited.
  value.holder.group = pid && pid->leads_group();
  // Listening before the token is out: the script's release must find its keeper.
  Fd link = pid ? listen_for_release(lock.token()) : Fd();
  auto sig = jitter_pause(options.key, options, signals);
  WaitOutcome outcome = sig ? WaitOutcome{Interrupted{*sig}}
                            : acquire(lock, encode_lock_value(value), options, signals);
  if (auto status = exit_unless_obtained(outcome, options)) return *status;
  const auto& got = std::get<Obtained>(outcome);
  auto give_back = [&] { (void)lock.release(Clock::now() + lock.command_timeout()); };
  try {
    print_acquired(options.key, lock.token(), got.fence, options.ttl, output_style(json));
  } catch (const Error&) {
    // Nobody can learn the token, so nobody could release the lock: give it back now.
    give_back();
    throw;
  }
  if (pid && !start_keeper(lock, got, options, *pid, link, signals, global)) {
    int err = errno;  // before the release's own calls
    give_back();
    throw system_call_error("cannot start the keeper of --while-pid", "fork", err, Call::spawning);
  }
  return k_exit_ok;
}

namespace {

struct AcquireArgs : Arguments {
  std::string key;
  bool json = false;
  std::optional<int> while_pid;

  int run(const Invocation& in) override {
    in.resolved.run.key = in.key(key);
    try {
      return acquire_verb(in.resolved.global, in.resolved.run, json, while_pid);
    } catch (Error& e) {
      // rlock's own failure (out of descriptors, say) names the lock; it was given back.
      if (e.exit_status() == k_exit_internal) e.set_key(in.resolved.run.key);
      throw;
    }
  }
};

constexpr Option k_key[] = {option<&AcquireArgs::key>("KEY", k_key_help).must()};
constexpr Option k_options[] = {
    setting("ttl", "lock expiry; extend it before then (default 30s), or --while-pid renews it"),
    setting("retention"),
    option<&AcquireArgs::json>("--json", k_json_help),
    option<&AcquireArgs::while_pid>("--while-pid",
                                    "keep the lock while process PID lives (a detached keeper "
                                    "renews it), give it back when PID exits, signal PID if it "
                                    "is lost",
                                    "PID")
        .range(1, 1 << 22),
    setting("kill-signal",
            "with --while-pid: the signal PID gets if the lock is lost (default TERM)"),
    setting("kill-after",
            "with --while-pid: SIGKILL this long after it (default 5s, or ttl/3 if shorter)"),
    setting("on-lost", "with --while-pid: kill (default), or ignore: only stop renewing")};

}  // namespace

constexpr Command k_acquire_command = {
    "acquire",
    "take the lock, print its token, exit",
    "KEY\nKEY --while-pid PID",
    {k_key, k_waiting, k_options, k_output, k_connection},
    "Prints only the token: t=$(rlock acquire KEY). Nothing renews the lock:\n"
    "run rlock extend before the ttl runs out, and rlock release at the end.\n"
    "Or hold it until the script exits: tok=$(rlock acquire --while-pid $$ KEY).\n"
    "Examples:\n"
    "  rlock acquire --while-pid $$ lock:migrate\n"
    "  t=$(rlock acquire --ttl 5m lock:migrate)\n"
    "Exit status: 0 acquired, 69 Redis unavailable, 75 busy (-E changes it); 64 usage, "
    "78 configuration, 125 rlock failed.",
    make_arguments<AcquireArgs>};

}  // namespace rlock
