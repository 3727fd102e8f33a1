// acquire --while-pid PID: flock's `exec 9>f; flock 9` for a fleet. The lock is taken, its
// token printed, and a detached keeper holds it for PID as `rlock run` holds it for its
// command: run's Supervisor watches PID (and, when PID leads a process group, every process of
// it), renews the lease, and on a loss, on rlock stop or on a signal to the keeper stops them
// as it stops a command (rlock-stop(1), rlock-run(1) "Lease safety"); the lock is given back the
// moment they are gone. `rlock release --token T` tells it (keeper_link.h), so that a
// script's own release is not taken for a loss.
#include "run/keeper.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "lock/held_lock.h"
#include "lock/lease.h"
#include "lock/lock.h"
#include "lock/stop_request.h"
#include "process/keeper_link.h"
#include "process/pid_watch.h"
#include "process/process_group.h"
#include "process/signals.h"
#include "run/command.h"
#include "run/supervisor.h"
#include "run/wait.h"
#include "settings/connect.h"
#include "settings/options.h"
#include "util/stderr_writer.h"

namespace rlock {

namespace {

// Leaves the caller's session and terminal, with stdio on /dev/null: a command substitution,
// $(rlock acquire ...), ends when its pipe closes, and cron mails once stderr does.
void detach() {
  ::setsid();
  int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    for (int fd = 0; fd <= 2; ++fd) ::dup2(null, fd);
    if (null > 2) ::close(null);
  }
  if (::chdir("/") != 0) {
    // Nothing of the keeper uses a path; staying keeps a directory busy, no more.
  }
}

// PID's group as the supervisor watches it (process_group.h). PID is not the keeper's child:
// no SIGCHLD tells of its end, and how it ended is never known, which nothing needs (the keeper
// records no run in the history, as acquire and release record none). The script's own release
// (keeper_link.h) ends the watch as PID's end does: nothing of PID's holds the lock after it.
class ScriptGroup : public ProcessGroup {
public:
  ScriptGroup(const PidWatch& pid, const Fd& link, std::string key);

  pid_t pid() const override { return pid_.pid(); }
  void signal_group(int sig) const override { (void)pid_.signal(sig); }
  // Alive or not: a PidWatch tells no more.
  int live_group_members() const override { return released_.valid() || all_gone() ? 0 : 1; }
  std::optional<Event> poll() override;
  bool rlocks_child() const override { return false; }
  int news_fd() const override { return news_.get(); }
  Millis look_every() const override;
  // No guardian: the keeper alone watches PID.
  void stopping() override {}
  bool guardian_stopped_group() const override { return false; }
  std::optional<int> replace_dead_guardian() override { return std::nullopt; }

  bool all_gone() const { return pid_.all_gone(); }
  // The script's release, once it came, to acknowledge once nothing renews the lock.
  Fd take_release() { return std::move(released_); }

private:
  const PidWatch& pid_;
  const Fd& link_;
  const std::string key_;
  Fd news_;  // epoll: PID's pidfd until it exits, and the link; none when out of descriptors
  Fd released_;
  bool exited_ = false;
  bool told_ = false;  // poll() told of the end
};

ScriptGroup::ScriptGroup(const PidWatch& pid, const Fd& link, std::string key)
    : pid_(pid), link_(link), key_(std::move(key)), news_(::epoll_create1(EPOLL_CLOEXEC)) {
  for (int fd : {pid.fd(), link.get()}) {
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.fd = fd;
    if (news_.valid() && fd >= 0 && ::epoll_ctl(news_.get(), EPOLL_CTL_ADD, fd, &e) != 0)
      news_.reset();
  }
}

std::optional<ProcessGroup::Event> ScriptGroup::poll() {
  // The listening socket does not block: nothing to accept is no request.
  if (link_.valid() && !released_.valid()) released_ = stop_request(link_.get(), key_);
  if (!exited_ && pid_.exited()) {
    exited_ = true;
    // Its pidfd stays readable from now on: what is left of its group is looked at instead.
    if (news_.valid() && pid_.fd() >= 0)
      ::epoll_ctl(news_.get(), EPOLL_CTL_DEL, pid_.fd(), nullptr);
  }
  if (told_ || !(exited_ || released_.valid())) return std::nullopt;
  told_ = true;
  return Event{Event::Kind::exited, 0, false};
}

Millis ScriptGroup::look_every() const {
  // While PID runs its pidfd tells of its end; after, the rest of its group has nothing to.
  bool told = news_.valid() && pid_.fd() >= 0 && !exited_;
  return told ? Millis(0) : k_pid_poll_interval;
}

// What of the run's settings the keeper honours: --max-run, --leftovers and the heartbeat are
// run's alone (a config file's included).
RunOptions keeper_options(const RunOptions& options) {
  RunOptions o = options;
  o.max_run.reset();
  o.leftovers = RunOptions::Leftovers::wait;
  return o;
}

class Keeper {
public:
  Keeper(Lock& lock, const Obtained& got, const RunOptions& options, const PidWatch& pid,
         const Fd& link, SignalEvents& signals, const GlobalOptions& global)
      : lock_(lock), got_(got), options_(keeper_options(options)), pid_(pid), link_(link),
        signals_(signals), global_(global) {}

  void run() {
    // The lease's keeping first: should it fail (no descriptor or thread for it), nothing has
    // given the lock back yet, and stop_unkept() stops PID before the lease ends.
    Renewals lease(lock_, options_.ttl, got_.sent);
    lease.start();
    // Ends after the lock is given back (HeldLock): a stop asked until then is answered, with
    // whose stop it was if another's came first. It listens from the start (a script's lock is
    // held for a while); without it the lock is kept all the same.
    std::optional<StopListener> listener;
    StopListener* stops = listen_for_stops(
        listener, [global = global_] { return connect_redis(global, true); }, lock_, Millis(0));
    HeldLock held(lock_, options_.ttl, got_.sent);
    // PID, and the commands of its group when it leads one, watched as `rlock run` watches its
    // command: the lock is held until the last of them is gone, and a loss, rlock stop or a
    // signal to the keeper stops them first.
    ScriptGroup group(pid_, link_, lock_.key());
    Supervisor(options_, {lease, signals_, nullptr, nullptr, stops}, got_.sent).watch(group);
    bool broken = lease.state() == Renewals::State::not_mine;
    lease.stop();
    if (Fd request = group.take_release(); request.valid()) {
      // The script's `rlock release --token` gives it back, right after the answer.
      held.hand_over();
      acknowledge(request);
    } else if (!group.all_gone()) {
      // Let go (a signal under --on-lost ignore), or what even KILL has not ended yet: the lock
      // is left to expire, never given back while a process of PID's may hold on to it.
      held.hand_over();
    } else if (broken) {
      (void)held.release_lost(nullptr, k_release_budget);
    }
    // Else HeldLock releases: PID is gone, and so is what the lock protected.
  }

private:
  Lock& lock_;
  const Obtained& got_;
  const RunOptions options_;
  const PidWatch& pid_;
  const Fd& link_;
  SignalEvents& signals_;
  const GlobalOptions& global_;
};

// PID's lock cannot be kept: PID is stopped as on a loss (the kill signal, SIGKILL after the
// kill-after and before DEADLINE, the lease's end), and the lock is left to expire.
void stop_unkept(const PidWatch& pid, const RunOptions& options, TimePoint deadline) {
  pid.signal(options.kill_signal);
  TimePoint kill_at =
      std::min(Clock::now() + options.kill_after, deadline - options.kill_after / 2);
  while (!pid.all_gone() && Clock::now() < kill_at) ::poll(nullptr, 0, 10);
  pid.signal(SIGKILL);
}

}  // namespace

bool start_keeper(Lock& lock, const Obtained& got, const RunOptions& options, const PidWatch& pid,
                  const Fd& link, SignalEvents& signals, const GlobalOptions& global) {
  // The keeper starts a thread of its own: it must be the fork of a process without others.
  stop_stderr_writer(k_exit_stderr_patience);
  pid_t child = ::fork();
  if (child < 0) return false;
  if (child > 0) return true;
  detach();
  try {
    Keeper(lock, got, options, pid, link, signals, global).run();
  } catch (...) {
    // Out of descriptors, threads or memory: the lease cannot be kept.
    stop_unkept(pid, options, lease_deadline(got.sent, options.ttl));
  }
  ::_exit(0);
}

}  // namespace rlock
