// acquire --while-pid PID: flock's `exec 9>f; flock 9` for a fleet. The lock is taken, its
// token printed, and a detached keeper renews it while PID (and, when PID leads a process
// group, every process of it) lives, gives it back the moment they are gone, and on a loss
// stops them as `rlock run` stops its command: the kill signal, then SIGKILL before the lease
// could run out. `rlock release --token T` tells it (keeper_link.h),
// so that a script's own release is not taken for a loss. `rlock stop` stops PID the same way,
// and the keeper gives the lock back once PID's group is gone.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include "run/keeper.h"

#include "lock/held_lock.h"
#include "lock/lease.h"
#include "lock/lock.h"
#include "lock/stop_request.h"
#include "process/keeper_link.h"
#include "process/pid_watch.h"
#include "process/signals.h"
#include "run/wait.h"
#include "settings/connect.h"
#include "util/log.h"
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

class Keeper {
public:
  Keeper(Lock& lock, const Obtained& got, const RunOptions& options, const PidWatch& pid,
         const Fd& link, SignalEvents& signals, const GlobalOptions& global)
      : lock_(lock), got_(got), options_(options), pid_(pid), link_(link), signals_(signals),
        global_(global), kill_after_(options.kill_after) {}

  void run() {
    // The lease's keeping first: should it fail (no descriptor or thread for it), nothing has
    // given the lock back yet, and stop_unkept() stops PID before the lease ends.
    LeaseKeeper lease(lock_, options_.ttl, got_.sent);
    lease.start();
    // Ends after the lock is given back (HeldLock): a stop asked until then is answered, with
    // whose stop it was if another's came first.
    std::unique_ptr<StopListener> stops = stop_listener();
    HeldLock held(lock_, options_.ttl, got_.sent);
    for (;;) {
      // PID, and the commands of its group when it leads one: the lock is held until the last
      // of them is gone, as `rlock run` holds it for its command's leftovers.
      if (pid_.all_gone()) break;
      TimePoint now = Clock::now();
      if (!lost_) check_lease(lease, now);
      if (kill_at_ && now >= *kill_at_) {
        pid_.signal(SIGKILL);
        kill_at_.reset();
      }
      // Once PID has exited its pidfd stays readable: look at what is left of its group on the
      // interval instead.
      bool pid_running = !pid_.exited();
      pollfd fds[5] = {{pid_running ? pid_.fd() : -1, POLLIN, 0},
                       {link_.get(), POLLIN, 0},
                       {lease.wake_fd(), POLLIN, 0},
                       {signals_.fd(), POLLIN, 0},
                       {stops ? stops->wake_fd() : -1, POLLIN, 0}};
      ::poll(fds, 5, millis_until(next_look(lease, now, pid_running)));
      if (fds[4].revents & POLLIN) stop_on_request(*stops, lease);
      if (fds[1].revents & POLLIN) {
        if (Fd request = stop_request(link_.get(), lock_.key()); request.valid()) {
          // The script's `rlock release --token` gives it back, right after the answer.
          lease.stop();
          held.hand_over();
          acknowledge(request);
          return;
        }
      }
      if (fds[2].revents & POLLIN) lease.drain_wakeups();
      if (signal_arrived()) {
        // Stopped from outside (a shutdown, a kill): PID loses its lock, as on a loss, but
        // only once it is gone; with --on-lost ignore the lock is left to expire.
        if (options_.on_lost == RunOptions::OnLost::ignore) {
          lease.stop();
          held.hand_over();
          return;
        }
        if (!kill_at_) {
          pid_.signal(options_.kill_signal);
          kill_at_ = std::min(Clock::now() + kill_after_, lease.deadline());
        }
      }
    }
    bool broken = lease.state() == LeaseKeeper::State::not_mine;
    lease.stop();
    if (broken) (void)held.release_lost(nullptr, k_release_budget);
    // Else HeldLock releases: PID is gone, and so is what the lock protected.
  }

private:
  // rlock stop's listener, from the start (a script's lock is held for a while); none when
  // it cannot be had: the lock is kept all the same.
  std::unique_ptr<StopListener> stop_listener() {
    try {
      auto stops =
          std::make_unique<StopListener>([global = global_] { return connect_redis(global, true); },
                                         lock_.key(), lock_.token(), Millis(0));
      stops->start();
      return stops;
    } catch (const std::exception&) {
      return nullptr;
    }
  }

  // rlock stop: PID gets the asked signal (or the kill signal), SIGKILL after the asked
  // kill-after (or ours), before the lease's end; the lock is given back once it is gone.
  void stop_on_request(StopListener& stops, const LeaseKeeper& lease) {
    auto request = stops.take();
    if (!request || kill_at_) return;
    pid_.signal(request->signal ? request->signal : options_.kill_signal);
    kill_at_ = std::min(Clock::now() + request->kill_after.value_or(kill_after_), lease.deadline());
  }

  // As `rlock run` judges its lease (judge_lease): a loss stops PID with the kill signal, and
  // SIGKILL lands by the lease's deadline, before the key can be anyone else's.
  void check_lease(const LeaseKeeper& lease, TimePoint now) {
    LossVerdict v = judge_lease(lease.state(), lease.deadline(), now, kill_after_, ignore_loss());
    if (v.act == LossVerdict::Act::go_on) return;
    lost_ = true;
    if (v.act == LossVerdict::Act::kill_now) pid_.signal(SIGKILL);
    if (v.act != LossVerdict::Act::stop) return;
    pid_.signal(options_.kill_signal);
    kill_at_ = v.kill_at;
  }

  bool ignore_loss() const { return options_.on_lost == RunOptions::OnLost::ignore; }
  TimePoint threshold(const LeaseKeeper& lease) const {
    return loss_threshold(lease.deadline(), kill_after_, ignore_loss());
  }

  TimePoint next_look(const LeaseKeeper& lease, TimePoint now, bool pid_running) const {
    TimePoint next = now + k_max_block;
    if (!lost_) next = std::min(next, threshold(lease));
    if (kill_at_) next = std::min(next, *kill_at_);
    if (pid_.fd() < 0 || !pid_running) next = std::min(next, now + k_pid_poll_interval);
    return next;
  }

  // Any signal that would end a process (ends_a_process) asks the keeper to stop.
  bool signal_arrived() { return signals_.next_request_to_stop().has_value(); }

  Lock& lock_;
  const Obtained& got_;
  const RunOptions& options_;
  const PidWatch& pid_;
  const Fd& link_;
  SignalEvents& signals_;
  const GlobalOptions& global_;
  const Millis kill_after_;
  bool lost_ = false;
  std::optional<TimePoint> kill_at_;  // SIGKILL PID then, after a loss
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
