#include "verbs/run_supervisor.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <system_error>

#include "lock/lease.h"
#include "output/output.h"
#include "process/child.h"
#include "process/heartbeat.h"
#include "process/signals.h"
#include "process/terminal.h"
#include "settings/settings.h"
#include "util/log.h"

namespace rlock {

namespace {

// After the child's group was SIGKILLed, how long to wait for its last members to vanish
// (a process in uninterruptible sleep dies only when it wakes) before reporting anyway.
constexpr Millis k_group_exit_grace{2000};
// Once the command has exited, how often to look whether its group is empty: soon at first,
// then less often (each look may read /proc). A leftover that rlock became the parent of wakes
// it (SIGCHLD) when it exits, sooner than this.
constexpr Millis k_group_poll_first{10};
constexpr Millis k_group_poll_max{1000};
// A second SIGTERM or SIGINT at least this long after the first SIGKILLs the command's group.
constexpr Millis k_second_stop_request_after{1000};
// How soon to try again when the renewal thread could not be started.
constexpr Millis k_keeper_retry{100};

class Supervisor {
public:
  Supervisor(const RunOptions& options, const Supervised& what, TimePoint started)
      : options_(options), child_(&what.child), keeper_(what.keeper), signals_(what.signals),
        terminal_(what.terminal), heartbeat_(what.heartbeat), stops_(what.stops),
        attempts_(what.attempts), kill_after_(options.kill_after),
        keeper_start_at_(what.keeper.start_due()) {
    if (options.max_run) max_run_at_ = started + *options.max_run;
  }

  Outcome run() {
    start_listener();
    for (;;) {
      TimePoint now = Clock::now();
      notice_guardian(now);
      if (child_status_ && !between_attempts() && group_done(now)) {
        End why = stopping_ ? stopping_->why : End::exited;
        // A death by SIGINT or SIGQUIT is Ctrl-C or Ctrl-\ in the command's terminal, which
        // rlock does not see: as a shell stops a loop, it is the last attempt.
        bool quit = child_signalled_ && (*child_status_ == exit_status_for_signal(SIGINT) ||
                                         *child_status_ == exit_status_for_signal(SIGQUIT));
        Outcome end{why, *child_status_, child_signalled_,
                    why == End::stopped ? stop_request_ : std::nullopt};
        end.asked_to_stop = interrupted_ || stop_request_.has_value() || quit;
        std::optional<Millis> delay;
        if (why == End::exited && !interrupted_ && !quit && !lost_ && attempts_)
          delay = attempts_->again(end);
        if (!delay) return end;
        await_next_attempt(now + *delay);
        continue;
      }
      if (between_attempts()) {
        // The run ends before its next attempt: stopped, lost (--on-lost ignore too: a command
        // that runs may go on without the lock, none may start), past --max-run, or a signal.
        if (lost_ && !stopping_) stopping_ = Stopping{End::lost, now};
        if (stopping_ || interrupted_)
          return {stopping_ ? stopping_->why : End::exited, *child_status_, child_signalled_,
                  stopping_ && stopping_->why == End::stopped ? stop_request_ : std::nullopt, true,
                  interrupted_ || stop_request_.has_value()};
        if (now >= *next_attempt_at_ && !attempts_->still_held()) {
          log(Level::error, {"lost", key(), "lock lost between attempts: no more attempts"});
          lost_ = true;
          continue;
        }
        if (now >= *next_attempt_at_ && !start_next_attempt()) interrupted_ = true;
      }
      decide(now);
      wait_for_event(next_wake());
    }
  }

private:
  struct Stopping {
    End why;
    TimePoint kill_at;  // SIGKILL to the group at this point
  };

  bool between_attempts() const { return next_attempt_at_.has_value(); }

  // --retry: the attempt has ended, and the next begins at AT. Meanwhile the lease is renewed,
  // and a stop, the loss, --max-run or a signal ends the run; rlock keeps the terminal.
  void await_next_attempt(TimePoint at) {
    next_attempt_at_ = at;
    stopping_.reset();
    killed_at_.reset();
    if (terminal_) terminal_->take_back();
  }

  // Starts the next attempt; false when it could not start (the run ends as the last did).
  bool start_next_attempt() {
    Child* next = attempts_->start_next();
    if (!next) return false;
    child_ = next;
    next_attempt_at_.reset();
    child_status_.reset();
    child_signalled_ = false;
    leftovers_found_ = false;
    group_poll_ = k_group_poll_first;
    if (auto problem = child_->exec_problem()) {
      // Gone or no longer executable since the first attempt: that attempt ends at once.
      log_error(problem->message);
      child_status_ = problem->exit_status;
    }
    return true;
  }

  // Once the command has exited: whether nothing of its group is left (or, after SIGKILL, what
  // is left cannot die yet). The first time leftovers are found, says so and, with
  // --leftovers kill, starts stopping them.
  bool group_done(TimePoint now) {
    int live = child_->live_group_members();
    if (live == 0 || (killed_at_ && now >= *killed_at_ + k_group_exit_grace)) {
      child_->reap();
      return true;
    }
    if (!leftovers_found_) {
      leftovers_found_ = true;
      bool kill = options_.leftovers == RunOptions::Leftovers::kill;
      std::string what = std::to_string(live) + (live == 1 ? " process" : " processes");
      // Said on a terminal or with -v: under cron every line of stderr is mail.
      log(::isatty(STDERR_FILENO) ? Level::info : Level::debug,
          {"leftovers",
           key(),
           kill ? "the command exited; stopping the " + what + " it left in its process group"
                : "the command exited; holding the lock until the " + what +
                      " it left in its process group exit (--leftovers kill stops them)",
           {{"processes", live}}});
      if (kill && !stopping_) begin_stop(End::exited, now + kill_after_, options_.kill_signal);
    }
    return false;
  }

  // The guardian stopped the command at the lease's end because rlock did not (guardian.h):
  // rlock was stopped or starved, and the lock may be another's now.
  void notice_guardian(TimePoint now) {
    if (lost_ || !child_->guardian_stopped_group()) return;
    lost_ = true;
    TimePoint deadline = keeper_.deadline();
    auto gap = std::chrono::duration_cast<Millis>(deadline > now ? deadline - now : now - deadline);
    log(Level::error,
        {"lost", key(),
         std::string("lock lost: rlock was ") + (suspended_ ? "suspended" : "stopped or starved") +
             " past its lease (" +
             (deadline > now ? format_duration(gap) + " left"
                             : "ended " + format_duration(gap) + " ago") +
             "), so its guardian stopped the command; the lock may be another's now"});
    begin_stop(End::lost, deadline, 0);
  }

  // While anything of the command's group runs, the lease, --max-run and the heartbeat hold
  // for it.
  void decide(TimePoint now) {
    if (!keeper_.started() && now >= keeper_start_at_) start_keeper(now);
    check_lease(now);
    if (max_run_at_ && now >= *max_run_at_ && !stopping_) {
      log(Level::error, {"max_run", key(),
                         "the command ran past --max-run " + format_duration(*options_.max_run) +
                             "; stopping it"});
      begin_stop(End::max_run, now + kill_after_, options_.kill_signal);
    }
    if (heartbeat_ && !stopping_ && !between_attempts() && now >= heartbeat_->deadline() &&
        heartbeat_->stale(now)) {
      log(Level::error, {"hung", key(),
                         "the command has not touched " + heartbeat_->path() + " for " +
                             format_duration(heartbeat_->stale_after()) +
                             " (--stale-after); stopping it as hung"});
      begin_stop(End::hung, now + kill_after_, options_.kill_signal);
    }
    if (stopping_ && !killed_at_ && now >= stopping_->kill_at) {
      if (!child_status_)
        log(Level::error, {"kill", key(), "the command is still running; sending KILL"});
      kill_group(SIGKILL, now);
    }
  }

  // Without its thread rlock stop cannot reach the run; the run goes on (it is the operator's
  // tool that fails, not the job).
  void start_listener() {
    if (!stops_) return;
    try {
      stops_->start();
    } catch (const std::system_error& e) {
      log(Level::warning, {"stop_listener", key(),
                           std::string("cannot listen for stop requests (") + e.what() +
                               "); rlock stop will not reach this run"});
      stops_ = nullptr;
    }
  }

  // rlock stop: the command's group gets the asked signal (or --kill-signal) now and KILL after
  // the asked kill-after (or --kill-after), and the run ends as stopped, unless its lock was
  // lost meanwhile, the graver end. Leftovers of a command that exited are stopped too.
  void on_stop_request(TimePoint now) {
    auto request = stops_->take();
    if (!request || stop_request_) return;
    stop_request_ = request;
    int sig = request->signal ? request->signal : options_.kill_signal;
    log(Level::warning,
        {"stop_requested", key(),
         "stop requested by " + printable(stopped_by_text(request->by, request->reason), 200) +
             (between_attempts() ? std::string("; the run ends before its next attempt")
                                 : "; sending SIG" + signal_name(sig) + " to the command")});
    if (stopping_ && stopping_->why == End::lost) return;
    begin_stop(End::stopped, now + request->kill_after.value_or(kill_after_), sig);
  }

  // A thread may not start (ulimit -u, out of memory): retry soon. A lease that nothing renews
  // runs out, and the loss path below stops the command in time, so this never goes unsafe.
  void start_keeper(TimePoint now) {
    try {
      keeper_.start();
    } catch (const std::system_error& e) {
      if (!keeper_failed_)
        log(Level::warning,
            {"renewal_thread", key(),
             std::string("cannot start the renewal thread (") + e.what() + "); retrying"});
      keeper_failed_ = true;
      keeper_start_at_ = now + k_keeper_retry;
    }
  }

  void check_lease(TimePoint now) {
    if (lost_) return;
    TimePoint deadline = keeper_.deadline();
    LossVerdict v = judge_lease(keeper_.state(), deadline, now, kill_after_, ignore_loss());
    if (v.act == LossVerdict::Act::go_on) return;
    lost_ = true;
    std::string why;
    switch (v.why) {
    case LossVerdict::Why::ran_out: why = "the lease ran out, e.g. rlock was frozen"; break;
    case LossVerdict::Why::not_ours: why = "broken, gone, or another token holds it"; break;
    case LossVerdict::Why::unreachable:
    case LossVerdict::Why::none:
      why = "no renewal succeeded; the lease ends in " +
            format_duration(std::chrono::duration_cast<Millis>(deadline - now));
      break;
    }
    switch (v.act) {
    case LossVerdict::Act::go_on: return;
    case LossVerdict::Act::ignore:
      log(Level::error, {"lost_ignored", key(),
                         "lock lost; --on-lost ignore: the command keeps running without it"});
      return;
    case LossVerdict::Act::kill_now:
      log(Level::error, {"lost", key(), "lock lost (" + why + "); killing the command"});
      begin_stop(End::lost, now, SIGKILL);
      return;
    case LossVerdict::Act::stop:
      log(Level::error, {"lost", key(), "lock lost (" + why + "); stopping the command"});
      begin_stop(End::lost, v.kill_at, options_.kill_signal);
      return;
    }
  }

  bool ignore_loss() const { return options_.on_lost == RunOptions::OnLost::ignore; }
  TimePoint loss_threshold() const {
    return rlock::loss_threshold(keeper_.deadline(), kill_after_, ignore_loss());
  }

  // Stops the command's group: SIG now (none when 0), SIGKILL at KILL_AT.
  void begin_stop(End why, TimePoint kill_at, int sig) {
    if (between_attempts()) {
      // No command runs: the run ends as WHY (run()).
      if (!stopping_ || why == End::lost) stopping_ = Stopping{why, kill_at};
      return;
    }
    child_->stopping();  // the guardian's kill signal is not needed now; its SIGKILL still is
    if (stopping_) {
      // Already stopping for --max-run: a loss is the graver reason and may be more urgent.
      stopping_->why = why;
      stopping_->kill_at = std::min(stopping_->kill_at, kill_at);
    } else {
      stopping_ = Stopping{why, kill_at};
    }
    if (sig == 0) return;
    if (sig == SIGKILL) {
      kill_group(SIGKILL, Clock::now());
      return;
    }
    child_->signal_group(sig);
    child_->signal_group(SIGCONT);  // a stopped process must wake to act on the signal
  }

  void kill_group(int sig, TimePoint now) {
    child_->signal_group(sig);
    killed_at_ = now;
  }

  TimePoint next_wake() {
    TimePoint now = Clock::now();
    TimePoint next = now + std::chrono::hours(24);
    if (!lost_) next = std::min(next, loss_threshold());
    if (!keeper_.started()) next = std::min(next, keeper_start_at_);
    if (max_run_at_ && !stopping_) next = std::min(next, *max_run_at_);
    if (heartbeat_ && !stopping_ && !between_attempts())
      next = std::min(next, heartbeat_->deadline());
    if (between_attempts()) return std::min(next, *next_attempt_at_);
    if (child_status_) {
      next = std::min(next, now + group_poll_);
      group_poll_ = std::min(group_poll_ * 2, k_group_poll_max);
    }
    if (stopping_ && !killed_at_) next = std::min(next, stopping_->kill_at);
    return next;
  }

  void wait_for_event(TimePoint until) {
    pollfd fds[3] = {{signals_.fd(), POLLIN, 0},
                     {keeper_.wake_fd(), POLLIN, 0},
                     {stops_ ? stops_->wake_fd() : -1, POLLIN, 0}};
    int n = ::poll(fds, 3, millis_until(until));
    if (n <= 0) return;  // timeout or EINTR: decide() looks at the clock
    if (fds[1].revents) keeper_.drain_wakeups();
    if (fds[2].revents) on_stop_request(Clock::now());
    while (auto sig = signals_.next()) {
      if (*sig == SIGCHLD) {
        collect_child();
      } else if (*sig == SIGCONT) {
        resume_child(Clock::now());
      } else if (between_attempts() && ends_a_process(*sig)) {
        // No command to forward it to: a request to stop, which ends the run (run()).
        interrupted_ = true;
      } else if (between_attempts() && *sig == SIGTSTP) {
        signals_.stop_self(SIGTSTP, true);  // Ctrl-Z: rlock stops as a job would
      } else if (between_attempts()) {
        // No command to forward it to: its group is gone, and its number may be another's.
      } else if (*sig == SIGTSTP) {
        // rlock's group is the foreground one, not the command's (or `kill -TSTP`): the
        // command stops first, and rlock with it (on_child_stopped).
        child_->signal_group(SIGTSTP);
      } else if ((*sig == SIGTERM || *sig == SIGINT) && asked_again(Clock::now())) {
        // Asked twice to stop: the operator means it, whatever the command does with TERM.
        if (!killed_at_)
          log(Level::warning,
              {"signal_kill", key(),
               "SIG" + signal_name(*sig) + " again: killing the command's process group (KILL)"});
        interrupted_ = true;
        kill_group(SIGKILL, Clock::now());
      } else {
        // To the group while anything of it runs: leftovers hear it too. A signal that ends
        // a process ends the run: the command is not tried again (--retry).
        log(Level::debug,
            {"signal_forwarded", key(), "forwarding SIG" + signal_name(*sig) + " to the command"});
        if (ends_a_process(*sig)) interrupted_ = true;
        child_->signal_group(*sig);
      }
    }
    // poll() above reaped the guardian if someone killed it.
    if (auto how = child_->replace_dead_guardian())
      log(Level::warning, {"guardian_replaced", key(),
                           "the guardian process ended (status " + std::to_string(*how) +
                               "); started another, so the command still dies with rlock"});
  }

  // Whether a SIGTERM or SIGINT is the second request to stop: one that comes soon after the
  // first is the same request twice (a script's trap that signals rlock after its group was).
  bool asked_again(TimePoint now) {
    if (!asked_to_stop_) asked_to_stop_ = now;
    return now - *asked_to_stop_ >= k_second_stop_request_after;
  }

  void collect_child() {
    while (auto event = child_->poll()) {
      if (event->kind == Child::Event::Kind::exited) {
        child_status_ = event->status;
        child_signalled_ = event->signalled;
        return;
      }
      if (terminal_) on_child_stopped(event->status);
    }
  }

  // Job control (rlock(1) "Job control"), as sudo does it for a command in a process group of
  // its own: the shell's job is rlock, so rlock stops when its command stops and continues it
  // when continued, handing it the terminal only while rlock is the foreground job.
  void on_child_stopped(int stop_signal) {
    if ((stop_signal == SIGTTIN || stop_signal == SIGTTOU) && terminal_->ours()) {
      // It wants the terminal, and rlock has it (`fg` after `&`): give it over and go on.
      resume_child(Clock::now());
      return;
    }
    terminal_->take_back();
    TimePoint now = Clock::now();
    if (!lost_) {
      auto left = std::chrono::duration_cast<Millis>(loss_threshold() - now);
      log(Level::warning,
          {"suspended",
           key(),
           "suspended with the command (SIG" + signal_name(stop_signal) +
               "): the lock is not renewed while suspended; continue within " +
               format_duration(std::max(left, Millis(0))) + " (fg or bg) or the run ends (76)",
           {{"lease_left_ms", left.count()}}});
    }
    // Ctrl-Z reached only the command's group, which has the terminal; without rlock it would
    // have stopped the whole job, so rlock stops its own group (a pipeline it is part of too).
    suspended_ = true;
    if (signals_.stop_self(stop_signal, stop_signal == SIGTSTP)) resume_child(Clock::now());
  }

  // rlock was continued (fg, bg, kill -CONT): the command goes on too, with the terminal when
  // rlock is the foreground job; not when the lease ended meanwhile, when it is killed instead.
  void resume_child(TimePoint now) {
    notice_guardian(now);
    check_lease(now);
    if (killed_at_ || child_status_) return;
    if (terminal_ && terminal_->ours()) terminal_->hand_to(child_->pid());
    child_->signal_group(SIGCONT);
  }

  const std::string& key() const { return options_.key; }

  const RunOptions& options_;
  Child* child_;  // the current attempt's
  LeaseKeeper& keeper_;
  SignalEvents& signals_;
  Terminal* terminal_;
  Heartbeat* heartbeat_;  // --heartbeat-file, or null
  StopListener* stops_;   // rlock stop's requests, or null
  Attempts* attempts_;    // --retry, or null
  const Millis kill_after_;
  TimePoint keeper_start_at_;
  bool keeper_failed_ = false;
  std::optional<TimePoint> max_run_at_;
  std::optional<Stopping> stopping_;
  std::optional<TimePoint> killed_at_;
  std::optional<TimePoint> asked_to_stop_;    // the first SIGTERM or SIGINT
  std::optional<int> child_status_;           // the current attempt's, once it has exited
  std::optional<TimePoint> next_attempt_at_;  // --retry: between two attempts
  bool interrupted_ = false;                  // a signal that ends a process came: no more attempts
  bool child_signalled_ = false;
  bool suspended_ = false;  // by job control, with the command (on_child_stopped)
  bool lost_ = false;
  bool leftovers_found_ = false;
  std::optional<StopRequest> stop_request_;
  Millis group_poll_ = k_group_poll_first;
};

}  // namespace

Outcome supervise_command(const RunOptions& options, const Supervised& what, TimePoint started) {
  return Supervisor(options, what, started).run();
}

}  // namespace rlock
