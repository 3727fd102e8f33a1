// rlock acquire KEY: take the lock for a script that cannot wrap a command; print the token.
// With --while-pid PID, leave a keeper that holds it for as long as PID lives (keeper.cpp).
#include <unistd.h>

#include "keeper_link.h"
#include "lock.h"
#include "lock_value.h"
#include "log.h"
#include "output.h"
#include "pid_watch.h"
#include "signals.h"
#include "verbs/verbs.h"
#include "wait.h"

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
  WaitOutcome outcome = acquire(lock, encode_lock_value(value), options.ttl, options.wait, signals);
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
  if (pid && !start_keeper(lock, got, options, *pid, link, signals)) {
    give_back();
    throw Error(k_exit_internal, errno_message("fork (the keeper of --while-pid)"));
  }
  return k_exit_ok;
}

}  // namespace rlock
