#include "run/supervisor.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <system_error>
#include <utility>

#include "lock/lease.h"
#include "print/print.h"
#include "process/heartbeat.h"
#include "process/process_group.h"
#include "process/signals.h"
#include "process/terminal.h"
#include "settings/settings.h"
#include "util/log.h"

namespace rlock {

// After the child's group was SIGKILLed, how long to wait for its last members to vanish
// (a process in uninterruptible sleep dies only when it wakes) before reporting anyway.
constexpr Millis k_group_exit_grace{2000};
// Once the command has exited, how often to look whether its group is empty: soon, then less
// often (a look may read /proc). A leftover reparented to rlock wakes it sooner (SIGCHLD).
constexpr Millis k_group_poll_first{10};
constexpr Millis k_group_poll_max{1000};
// A second SIGTERM or SIGINT at least this long after the first SIGKILLs the command's group.
constexpr Millis k_second_stop_request_after{1000};
// How soon to try again when the renewal thread could not be started.
constexpr Millis k_renewals_retry{100};

Supervisor::Supervisor(const RunOptions& options, const Watched& watched, TimePoint started)
    : options_(options), w_(watched), ignore_loss_(options.on_lost == RunOptions::OnLost::ignore),
      renewals_start_at_(watched.lease.start_due()) {
  if (options.max_run) max_run_at_ = started + *options.max_run;
}

AttemptEnd Supervisor::watch(ProcessGroup& group) {
  announce(RunPhase{});  // running (again, under --retry)
  attempt_.emplace(group, k_group_poll_first);
  for (;;) {
    TimePoint now = Clock::now();
    notice_guardian(now);
    if (attempt_->let_go || (attempt_->status && group_done(now))) {
      AttemptEnd end = attempt_end();
      attempt_.reset();
      return end;
    }
    decide(now);
    wait_for_event(next_wake());
  }
}

std::optional<AttemptEnd> Supervisor::wait_until(TimePoint at, const AttemptEnd& last,
                                                 ProcessGroup& last_group) {
  attempt_.reset();
  if (w_.terminal) w_.terminal->take_back();
  for (;;) {
    TimePoint now = Clock::now();
    decide(now);
    // Even under --on-lost ignore a loss ends the run here: no attempt may start without the lock.
    if (lost_ && !ends_as_) ends_as_ = RunEnd::lost;
    if (ends_as_ || interrupted_) {
      AttemptEnd end = last;
      end.between_attempts = true;
      if (ends_as_) end.end = *ends_as_;
      return finish(end);
    }
    if (now >= at) return std::nullopt;
    wait_for_event(std::min(at, next_wake()), &last_group);
  }
}

AttemptEnd Supervisor::attempt_end() const {
  const Attempt& a = *attempt_;
  AttemptEnd end;
  end.status = a.status.value_or(0);  // none when let go
  end.end = a.signalled ? RunEnd::signalled : RunEnd::exited;
  // Stopped for its leftovers (--leftovers kill), the command still ended as it did.
  if (a.stopping && a.stopping->why != RunEnd::exited) end.end = a.stopping->why;
  // A death by SIGINT or SIGQUIT is Ctrl-C or Ctrl-\ in the command's terminal, which rlock
  // does not see: as a shell stops a loop, it is the last attempt.
  end.asked_to_stop = a.signalled && (end.status == exit_status_for_signal(SIGINT) ||
                                      end.status == exit_status_for_signal(SIGQUIT));
  return finish(end);
}

// END, told whether rlock was asked to stop (a signal, rlock stop) and by whose rlock stop.
AttemptEnd Supervisor::finish(AttemptEnd end) const {
  end.asked_to_stop = end.asked_to_stop || interrupted_ || stop_request_.has_value();
  if (end.end == RunEnd::stopped) end.stop = stop_request_;
  return end;
}

// Once the command has exited: whether its group is empty (or, after SIGKILL, what is left cannot
// die yet). On first finding leftovers, says so and, with --leftovers kill, starts stopping them.
bool Supervisor::group_done(TimePoint now) {
  Attempt& a = *attempt_;
  int live = a.group->live_group_members();
  if (live == 0 || (a.killed_at && now >= *a.killed_at + k_group_exit_grace)) {
    a.group->reap();
    return true;
  }
  if (!std::exchange(a.leftovers_found, true)) {
    bool kill = options_.leftovers == RunOptions::Leftovers::kill;
    std::string what = std::to_string(live) + (live == 1 ? " process" : " processes");
    // Said on a terminal or with -v: under cron every line of stderr is mail.
    log(::isatty(STDERR_FILENO) ? Level::info : Level::debug,
        {"leftovers",
         options_.key,
         kill ? "the command exited; stopping the " + what + " it left in its process group"
              : "the command exited; holding the lock until the " + what +
                    " it left in its process group exit (--leftovers kill stops them)",
         {{"processes", live}}});
    if (kill && !a.stopping)
      begin_stop(RunEnd::exited, now + options_.kill_after, options_.kill_signal);
  }
  return false;
}

// The guardian stopped the command at the lease's end because rlock did not (guardian.h):
// rlock was stopped or starved, and the lock may be another's now.
void Supervisor::notice_guardian(TimePoint now) {
  if (lost_ || !attempt_ || !attempt_->group->guardian_stopped_group()) return;
  lost_ = true;
  TimePoint deadline = w_.lease.deadline();
  auto gap = std::chrono::duration_cast<Millis>(deadline > now ? deadline - now : now - deadline);
  log(Level::error, {"lost", options_.key,
                     std::string("lock lost: rlock was ") +
                         (suspended_ ? "suspended" : "stopped or starved") + " past its lease (" +
                         (deadline > now ? format_duration(gap) + " left"
                                         : "ended " + format_duration(gap) + " ago") +
                         "), so its guardian stopped the command; the lock may be another's now"});
  begin_stop(RunEnd::lost, deadline, 0);
}

// The lease, --max-run and the heartbeat hold for the command while anything of its group
// runs; between attempts the lease and --max-run end the run.
void Supervisor::decide(TimePoint now) {
  if (!w_.lease.started() && now >= renewals_start_at_) start_renewals(now);
  check_lease(now);
  if (max_run_at_ && now >= *max_run_at_ && !stopping()) {
    log(Level::error, {"max_run", options_.key,
                       "the command ran past --max-run " + format_duration(*options_.max_run) +
                           (attempt_ ? "; stopping it" : "; no more attempts")});
    begin_stop(RunEnd::max_run, now + options_.kill_after, options_.kill_signal);
  }
  if (!attempt_) return;
  Attempt& a = *attempt_;
  if (w_.heartbeat && !a.stopping && now >= w_.heartbeat->deadline() && w_.heartbeat->stale(now)) {
    log(Level::error, {"hung", options_.key,
                       "the command has not touched " + w_.heartbeat->path() + " for " +
                           format_duration(w_.heartbeat->stale_after()) +
                           " (--stale-after); stopping it as hung"});
    begin_stop(RunEnd::hung, now + options_.kill_after, options_.kill_signal);
  }
  if (a.stopping && !a.killed_at && now >= a.stopping->kill_at) {
    if (!a.status)
      log(Level::error, {"kill", options_.key, "the command is still running; sending KILL"});
    kill_group(now);
  }
}

// rlock stop: the command's group gets the asked signal (or --kill-signal) now and KILL after
// the asked kill-after (or --kill-after), and the run ends as stopped, unless its lock was
// lost meanwhile, the graver end. Leftovers of a command that exited are stopped too.
void Supervisor::on_stop_request() {
  auto request = w_.stops->take();
  if (!request || stop_request_) return;
  stop_request_ = request;
  int sig = request->signal ? request->signal : options_.kill_signal;
  log(Level::warning,
      {"stop_requested", options_.key,
       "stop requested by " + printable(stopped_by_text(request->by, request->reason), 200) +
           (attempt_ ? "; sending SIG" + signal_name(sig) + " to the command"
                     : std::string("; the run ends before its next attempt"))});
  if (attempt_ && attempt_->stopping && attempt_->stopping->why == RunEnd::lost) return;
  begin_stop(RunEnd::stopped, Clock::now() + request->kill_after.value_or(options_.kill_after),
             sig);
}

// A thread may not start (ulimit -u, out of memory): retry soon. A lease that nothing renews
// runs out, and the loss path below stops the command in time, so this never goes unsafe.
void Supervisor::start_renewals(TimePoint now) {
  try {
    w_.lease.start();
  } catch (const std::system_error& e) {
    if (!std::exchange(renewals_failed_, true))
      log(Level::warning,
          {"renewal_thread", options_.key,
           std::string("cannot start the renewal thread (") + e.what() + "); retrying"});
    renewals_start_at_ = now + k_renewals_retry;
  }
}

void Supervisor::check_lease(TimePoint now) {
  if (lost_) return;
  TimePoint deadline = w_.lease.deadline();
  LossVerdict v = judge_lease(w_.lease.state(), deadline, now, options_.kill_after, ignore_loss_);
  if (v.act == LossVerdict::Act::go_on) return;
  lost_ = true;
  std::string why = "no renewal succeeded; the lease ends in " +
                    format_duration(std::chrono::duration_cast<Millis>(deadline - now));
  if (v.why == LossVerdict::Why::ran_out) why = "the lease ran out, e.g. rlock was frozen";
  if (v.why == LossVerdict::Why::not_ours) why = "broken, gone, or another token holds it";
  if (!attempt_) {
    log(Level::error,
        {"lost", options_.key, "lock lost (" + why + ") between attempts: no more attempts"});
    begin_stop(RunEnd::lost, now, 0);
  } else if (v.act == LossVerdict::Act::ignore) {
    log(Level::error, {"lost_ignored", options_.key,
                       "lock lost; --on-lost ignore: the command keeps running without it"});
  } else if (v.act == LossVerdict::Act::kill_now) {
    log(Level::error, {"lost", options_.key, "lock lost (" + why + "); killing the command"});
    begin_stop(RunEnd::lost, now, SIGKILL);
  } else {
    log(Level::error, {"lost", options_.key, "lock lost (" + why + "); stopping the command"});
    begin_stop(RunEnd::lost, v.kill_at, options_.kill_signal);
  }
}

// Stops the command's group as WHY: SIG now (none when 0), SIGKILL at KILL_AT. Between attempts
// the run ends as WHY (wait_until).
void Supervisor::begin_stop(RunEnd why, TimePoint kill_at, int sig) {
  if (!attempt_) {
    if (!ends_as_ || why == RunEnd::lost) ends_as_ = why;
    return;
  }
  Attempt& a = *attempt_;
  a.group->stopping();  // the guardian's kill signal is not needed now; its SIGKILL still is
  if (!a.stopping) a.stopping = Stopping{why, kill_at, Clock::now()};
  // Already stopping (for --max-run): a loss is the graver reason and may be more urgent.
  a.stopping->why = why;
  a.stopping->kill_at = std::min(a.stopping->kill_at, kill_at);
  if (sig == 0) return;
  // "stopping", for status: who asked (rlock stop), and when the group gets SIGKILL.
  const Stopping& s = *a.stopping;
  bool asked = s.why == RunEnd::stopped && stop_request_;
  announce({.kind = RunPhase::Kind::stopping,
            .why = s.why == RunEnd::exited ? "leftovers" : run_end_name(s.why),
            .signal = signal_name(sig),
            .by = asked ? stop_request_->by : "",
            .reason = asked ? stop_request_->reason : "",
            .since = s.since,
            .due = s.kill_at});
  if (sig == SIGKILL) {
    kill_group(Clock::now());
    return;
  }
  a.group->signal_group(sig);
  a.group->signal_group(SIGCONT);  // a stopped process must wake to act on the signal
}

void Supervisor::announce(const RunPhase& phase) {
  // News is for now, not for the first renewal; without news, Renewals::start_due stands.
  if (w_.lease.set_phase(phase) && !w_.lease.started())
    renewals_start_at_ = std::min(renewals_start_at_, Clock::now());
}

void Supervisor::kill_group(TimePoint now) {
  attempt_->group->signal_group(SIGKILL);
  attempt_->killed_at = now;
}

TimePoint Supervisor::next_wake() {
  TimePoint now = Clock::now();
  TimePoint next = now + std::chrono::hours(24);
  if (!lost_)
    next = std::min(next, loss_threshold(w_.lease.deadline(), options_.kill_after, ignore_loss_));
  if (!w_.lease.started()) next = std::min(next, renewals_start_at_);
  if (max_run_at_ && !stopping()) next = std::min(next, *max_run_at_);
  if (!attempt_) return next;
  Attempt& a = *attempt_;
  if (w_.heartbeat && !a.stopping) next = std::min(next, w_.heartbeat->deadline());
  if (a.status) {
    next = std::min(next, now + a.group_poll);
    a.group_poll = std::min(a.group_poll * 2, k_group_poll_max);
  }
  if (a.stopping && !a.killed_at) next = std::min(next, a.stopping->kill_at);
  if (a.group->look_every() > Millis(0)) next = std::min(next, now + a.group->look_every());
  return next;
}

void Supervisor::wait_for_event(TimePoint until, ProcessGroup* between) {
  ProcessGroup* group = attempt_ ? attempt_->group : nullptr;
  pollfd fds[4] = {{w_.signals.fd(), POLLIN, 0},
                   {w_.lease.wake_fd(), POLLIN, 0},
                   {w_.stops ? w_.stops->wake_fd() : -1, POLLIN, 0},
                   {group ? group->news_fd() : -1, POLLIN, 0}};
  int n = ::poll(fds, 4, millis_until(until));
  if (group && !group->rlocks_child()) collect_child();  // no SIGCHLD will tell
  if (n <= 0) return;  // timeout or EINTR: decide() looks at the clock
  if (fds[1].revents) w_.lease.drain_wakeups();
  if (fds[2].revents) on_stop_request();
  while (auto sig = w_.signals.next()) on_signal(*sig, between);
  // poll() above reaped the guardian if someone killed it.
  if (auto how = group ? group->replace_dead_guardian() : std::nullopt)
    log(Level::warning, {"guardian_replaced", options_.key,
                         "the guardian process ended (status " + std::to_string(*how) +
                             "); started another, so the command still dies with rlock"});
}

void Supervisor::on_signal(int sig, ProcessGroup* between) {
  TimePoint now = Clock::now();
  // A SIGTERM or SIGINT soon after the first is the same request twice (a script's trap that
  // signals rlock after its group was); a later one is the operator's second (below).
  if ((sig == SIGTERM || sig == SIGINT) && !asked_to_stop_at_) asked_to_stop_at_ = now;
  if (sig == SIGCHLD) {
    if (attempt_)
      collect_child();
    else if (between)
      between->reap();  // what left the last attempt's group, reparented to rlock
  } else if (!attempt_) {
    // No command to forward it to: its group is gone, and its number may be another's. A
    // signal that ends a process is a request to stop, which ends the run (wait_until).
    if (ends_a_process(sig)) interrupted_ = true;
    if (sig == SIGTSTP) w_.signals.stop_self(SIGTSTP, true);  // Ctrl-Z: rlock stops as a job would
  } else if (sig == SIGCONT) {
    resume_child(now);
  } else if (sig == SIGTSTP) {
    // rlock's group is the foreground one, not the command's (or `kill -TSTP`): the command
    // stops first, and rlock with it (on_child_stopped).
    attempt_->group->signal_group(SIGTSTP);
  } else if ((sig == SIGTERM || sig == SIGINT) &&
             now - *asked_to_stop_at_ >= k_second_stop_request_after) {
    // Asked twice to stop: the operator means it, whatever the command does with TERM.
    if (!attempt_->killed_at)
      log(Level::warning,
          {"signal_kill", options_.key,
           "SIG" + signal_name(sig) + " again: killing the command's process group (KILL)"});
    interrupted_ = true;
    kill_group(now);
  } else if (!attempt_->group->rlocks_child()) {
    stop_for_signal(sig);
  } else {
    // To the group while anything of it runs: leftovers hear it too. A signal that ends a
    // process ends the run: the command is not tried again (--retry).
    log(Level::debug, {"signal_forwarded", options_.key,
                       "forwarding SIG" + signal_name(sig) + " to the command"});
    if (ends_a_process(sig)) interrupted_ = true;
    attempt_->group->signal_group(sig);
  }
}

// A signal to acquire --while-pid's keeper is not for the process it watches (not rlock's child):
// as under rlock stop, the group gets the kill signal, KILL after --kill-after, the lease renewed
// meanwhile; under --on-lost ignore it is let go to run without the lock (rlock-acquire(1)).
void Supervisor::stop_for_signal(int sig) {
  if (!ends_a_process(sig)) return;
  interrupted_ = true;
  Attempt& a = *attempt_;
  if (ignore_loss_)
    a.let_go = true;
  else if (!a.stopping)
    begin_stop(RunEnd::exited, Clock::now() + options_.kill_after, options_.kill_signal);
}

void Supervisor::collect_child() {
  Attempt& a = *attempt_;
  while (auto event = a.group->poll()) {
    if (event->kind == ProcessGroup::Event::Kind::exited) {
      a.status = event->status;
      a.signalled = event->signalled;
      return;
    }
    if (w_.terminal) on_child_stopped(event->status);
  }
}

// Job control (rlock-run(1) "Job control"), as sudo does it for a command in a process group of
// its own: the shell's job is rlock, so rlock stops when its command stops and continues it
// when continued, handing it the terminal only while rlock is the foreground job.
void Supervisor::on_child_stopped(int stop_signal) {
  if ((stop_signal == SIGTTIN || stop_signal == SIGTTOU) && w_.terminal->ours()) {
    // It wants the terminal, and rlock has it (`fg` after `&`): give it over and go on.
    resume_child(Clock::now());
    return;
  }
  w_.terminal->take_back();
  TimePoint now = Clock::now();
  if (!lost_) {
    TimePoint threshold = loss_threshold(w_.lease.deadline(), options_.kill_after, ignore_loss_);
    auto left = std::chrono::duration_cast<Millis>(threshold - now);
    log(Level::warning,
        {"suspended",
         options_.key,
         "suspended with the command (SIG" + signal_name(stop_signal) +
             "): the lock is not renewed while suspended; continue within " +
             format_duration(std::max(left, Millis(0))) + " (fg or bg) or the run ends (76)",
         {{"lease_left_ms", left.count()}}});
  }
  // Ctrl-Z reached only the command's group, which has the terminal; without rlock it would
  // have stopped the whole job, so rlock stops its own group (a pipeline it is part of too).
  suspended_ = true;
  if (w_.signals.stop_self(stop_signal, stop_signal == SIGTSTP)) resume_child(Clock::now());
}

// rlock was continued (fg, bg, kill -CONT): the command goes on too, with the terminal when
// rlock is the foreground job; not when the lease ended meanwhile, when it is killed instead.
void Supervisor::resume_child(TimePoint now) {
  notice_guardian(now);
  check_lease(now);
  Attempt& a = *attempt_;
  if (a.killed_at || a.status) return;
  if (w_.terminal && w_.terminal->ours()) w_.terminal->hand_to(a.group->pid());
  a.group->signal_group(SIGCONT);
}

}  // namespace rlock
