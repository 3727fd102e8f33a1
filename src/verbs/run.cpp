// rlock run: hold KEY while a command runs. Joins the lock protocol (wait.h, lease.h) to the
// child process (child.h); the child runs only while the lease holds.
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "lock/held_lock.h"
#include "lock/history.h"
#include "lock/lease.h"
#include "lock/lock.h"
#include "lock/lock_value.h"
#include "output/metrics.h"
#include "output/output.h"
#include "process/bounded_call.h"
#include "process/child.h"
#include "process/heartbeat.h"
#include "process/signals.h"
#include "process/terminal.h"
#include "redis/redis.h"
#include "redis/redis_url.h"
#include "util/log.h"
#include "util/stderr_writer.h"
#include "util/text.h"
#include "verbs/command.h"
#include "verbs/verbs.h"
#include "verbs/wait.h"

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
// Time allowed for each step of the way out (the period's record, the release, the history)
// once Redis is known to be away: the lease ran out on it, or it refused us. One quick try,
// then exit: scripts and systemd wait for rlock, not for a server that is not there.
constexpr Millis k_quick_attempt{300};
// How long the command's start may wait for rlock's stderr to take a waiter's last status line.
constexpr Millis k_status_line_patience{100};
// How long the metrics file may take to write (MetricsRecorder).
constexpr Millis k_metrics_budget{2000};

enum class End { exited, lost, max_run, hung };

struct Outcome {
  End end;
  int child_status;
  bool signalled;  // the command died of a signal (child_status 128+N); an exit(N) is not
};

// Watches the child, the lease and incoming signals until the child's whole process group has
// ended: the command, and whatever it left running there (flock(1) keeps its lock while any
// process that inherited it lives), which --leftovers kill stops instead.
class Supervisor {
public:
  Supervisor(const RunOptions& options, Child& child, LeaseKeeper& keeper, SignalEvents& signals,
             Terminal* terminal, Heartbeat* heartbeat, TimePoint started)
      : options_(options), child_(child), keeper_(keeper), signals_(signals), terminal_(terminal),
        heartbeat_(heartbeat), kill_after_(options.kill_after),
        keeper_start_at_(keeper.start_due()) {
    if (options.max_run) max_run_at_ = started + *options.max_run;
  }

  Outcome run() {
    for (;;) {
      TimePoint now = Clock::now();
      notice_guardian(now);
      if (child_status_ && group_done(now))
        return {stopping_ ? stopping_->why : End::exited, *child_status_, child_signalled_};
      decide(now);
      wait_for_event(next_wake());
    }
  }

private:
  struct Stopping {
    End why;
    TimePoint kill_at;  // SIGKILL to the group at this point
  };

  // Once the command has exited: whether nothing of its group is left (or, after SIGKILL, what
  // is left cannot die yet). The first time leftovers are found, says so and, with
  // --leftovers kill, starts stopping them.
  bool group_done(TimePoint now) {
    int live = child_.live_group_members();
    if (live == 0 || (killed_at_ && now >= *killed_at_ + k_group_exit_grace)) {
      child_.reap();
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

  // The guardian stopped the command at the lease's end because rlock did not (child.cpp):
  // rlock was stopped or starved, and the lock may be another's now.
  void notice_guardian(TimePoint now) {
    if (lost_ || !child_.guardian_stopped_group()) return;
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
    if (heartbeat_ && !stopping_ && now >= heartbeat_->deadline() && heartbeat_->stale(now)) {
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
    child_.stopping();  // the guardian's kill signal is not needed now; its SIGKILL still is
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
    child_.signal_group(sig);
    child_.signal_group(SIGCONT);  // a stopped process must wake to act on the signal
  }

  void kill_group(int sig, TimePoint now) {
    child_.signal_group(sig);
    killed_at_ = now;
  }

  TimePoint next_wake() {
    TimePoint now = Clock::now();
    TimePoint next = now + std::chrono::hours(24);
    if (!lost_) next = std::min(next, loss_threshold());
    if (!keeper_.started()) next = std::min(next, keeper_start_at_);
    if (max_run_at_ && !stopping_) next = std::min(next, *max_run_at_);
    if (heartbeat_ && !stopping_) next = std::min(next, heartbeat_->deadline());
    if (child_status_) {
      next = std::min(next, now + group_poll_);
      group_poll_ = std::min(group_poll_ * 2, k_group_poll_max);
    }
    if (stopping_ && !killed_at_) next = std::min(next, stopping_->kill_at);
    return next;
  }

  void wait_for_event(TimePoint until) {
    pollfd fds[2] = {{signals_.fd(), POLLIN, 0}, {keeper_.wake_fd(), POLLIN, 0}};
    int n = ::poll(fds, 2, millis_until(until));
    if (n <= 0) return;  // timeout or EINTR: decide() looks at the clock
    if (fds[1].revents) keeper_.drain_wakeups();
    while (auto sig = signals_.next()) {
      if (*sig == SIGCHLD) {
        collect_child();
      } else if (*sig == SIGCONT) {
        resume_child(Clock::now());
      } else if (*sig == SIGTSTP) {
        // rlock's group is the foreground one, not the command's (or `kill -TSTP`): the
        // command stops first, and rlock with it (on_child_stopped).
        child_.signal_group(SIGTSTP);
      } else if ((*sig == SIGTERM || *sig == SIGINT) && asked_again(Clock::now())) {
        // Asked twice to stop: the operator means it, whatever the command does with TERM.
        if (!killed_at_)
          log(Level::warning,
              {"signal_kill", key(),
               "SIG" + signal_name(*sig) + " again: killing the command's process group (KILL)"});
        kill_group(SIGKILL, Clock::now());
      } else {
        // To the group while anything of it runs: leftovers hear it too.
        log(Level::debug,
            {"signal_forwarded", key(), "forwarding SIG" + signal_name(*sig) + " to the command"});
        child_.signal_group(*sig);
      }
    }
    // poll() above reaped the guardian if someone killed it.
    if (auto how = child_.replace_dead_guardian())
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
    while (auto event = child_.poll()) {
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
    if (terminal_ && terminal_->ours()) terminal_->hand_to(child_.pid());
    child_.signal_group(SIGCONT);
  }

  const std::string& key() const { return options_.key; }

  const RunOptions& options_;
  Child& child_;
  LeaseKeeper& keeper_;
  SignalEvents& signals_;
  Terminal* terminal_;
  Heartbeat* heartbeat_;  // --heartbeat-file, or null
  const Millis kill_after_;
  TimePoint keeper_start_at_;
  bool keeper_failed_ = false;
  std::optional<TimePoint> max_run_at_;
  std::optional<Stopping> stopping_;
  std::optional<TimePoint> killed_at_;
  std::optional<TimePoint> asked_to_stop_;  // the first SIGTERM or SIGINT
  std::optional<int> child_status_;
  bool child_signalled_ = false;
  bool suspended_ = false;  // by job control, with the command (on_child_stopped)
  bool lost_ = false;
  bool leftovers_found_ = false;
  Millis group_poll_ = k_group_poll_first;
};

// Adds this run to --metrics-file when rlock is done with it, on every path out of run_verb,
// after the release. A file that cannot be written is a warning: metrics never fail the job,
// nor hold rlock (a frozen file system: bounded_call.h).
struct MetricsRecorder {
  explicit MetricsRecorder(const RunOptions& options) : path(options.metrics_file) {
    m.key = options.key;
    m.result = "error";
  }
  ~MetricsRecorder() {
    if (!path) return;
    if (acquired) m.hold_seconds = std::chrono::duration<double>(Clock::now() - *acquired).count();
    m.finished_at =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    auto call = call_bounded([this] { return record_metrics(*path, m); }, k_metrics_budget);
    std::string problem = call.text;
    if (call.outcome == BoundedCall::Outcome::timed_out)
      problem = *path + " not written within " + format_duration(k_metrics_budget) +
                " (a file system that does not answer?)";
    if (!problem.empty()) log_warning("--metrics-file: " + problem);
  }
  std::optional<std::string> path;
  RunMetrics m;
  std::optional<TimePoint> acquired;
};

std::vector<std::string> command_argv(const RunOptions& options) {
  if (!options.shell_command) return options.command;
  const char* shell = std::getenv("SHELL");
  return {shell && *shell ? shell : "/bin/sh", "-c", *options.shell_command};
}

// The name that goes into the lock value and the history: the program, never its arguments nor
// an assignment (`PGPASSWORD=... psql` is psql).
std::string command_name(const RunOptions& options) {
  if (!options.shell_command) return options.command.front();
  return shell_command_name(*options.shell_command);
}

// A command that cannot run must not take the lock (and a typo must not keep others out): its
// exit status when the exec form's ARGV cannot run, having said why. PROGRAM gets where the
// command is, so that the child need not search again.
std::optional<int> refuse_unrunnable(const RunOptions& options,
                                     const std::vector<std::string>& argv, std::string* program) {
  if (options.shell_command) return std::nullopt;  // the shell reports its own errors
  if (is_assignment_word(argv.front())) {
    // Not a program but a shell's assignment, whose value may be a secret: not printed.
    std::string name = argv.front().substr(0, argv.front().find('='));
    log_error(name + "=...: an assignment is not a command (run `env " + name +
              "=... COMMAND`, or give the line to a shell with -c)");
    return k_exit_not_found;
  }
  if (auto problem = check_command(argv.front(), program)) {
    log_error(problem->message);
    return problem->exit_status;
  }
  return std::nullopt;
}

// When the lease that the command starts on begins: at acquisition, unless the reply came back
// so late (a paused or overloaded Redis) that less than half of it is left. The lease counts
// from when the command was sent, so such a command would be killed as soon as it started:
// renew first, counting from now. Nothing (the lock is to be given back) if that fails.
std::optional<TimePoint> fresh_lease(Lock& lock, Millis ttl, TimePoint acquire_sent) {
  if (Clock::now() < lease_deadline(acquire_sent, ttl) - ttl / 2) return acquire_sent;
  TimePoint sent = Clock::now();
  auto renewed = lock.renew(ttl, std::min(sent + lock.command_timeout(), sent + ttl / 2));
  if (renewed && *renewed) {
    log(Level::debug, {"renewed", lock.key(), "renewed at once: Redis answered late"});
    return sent;
  }
  log_error(lock.key() + ": Redis answered too late to run the command on the lease (" +
            (renewed ? std::string("the lock expired meanwhile") : renewed.failure().message) +
            ")");
  return std::nullopt;
}

// Appends to the key's history; a failure is one warning, never the job's.
void record_history(Redis& redis, const RunOptions& options, const RunRecord& record) {
  if (options.history_length > 0)
    send_history(redis, options.key,
                 history_entry(options.key, record, options.history_length, options.retention));
}

// The nested run of a lock this process tree holds: become the command, which runs under the
// outer rlock's lock and lease.
int exec_straight_through(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  flush_stderr(k_exit_stderr_patience);  // what is queued would be lost with this process
  ::execvp(args[0], args.data());
  int err = errno;
  log_error(argv[0] + ": " + std::strerror(err));
  return err == ENOENT ? k_exit_not_found : k_exit_not_executable;
}

// One run of the command under the lock, step by step (run_verb tells the order). Each step
// returns the exit status when the run ends there. The members are declared in the order
// they are needed, so that on any way out (a step's early end, an exception) they are undone
// in reverse: the renewal thread stops, the command's group is killed, the terminal comes
// back, and only then is the lock given back; the metrics are written last.
class Run {
public:
  Run(const RunOptions& options, Redis& redis, std::optional<Heartbeat> heartbeat)
      : options_(options), redis_(redis), heartbeat_(std::move(heartbeat)),
        lock_(make_lock(redis, options.key, make_token(), lock_mode(options))),
        holder_(current_holder(command_name(options))), metrics_(options) {}

  // Takes the lock (waiting as --wait says), on a lease with time to run the command on.
  std::optional<int> take() {
    LockValue value{lock_->token(), holder_, std::nullopt, options_.ttl.count(), std::nullopt};
    if (options_.history_length > 0 && !options_.once_per)  // --once-per: at the claim instead
      lock_->record_start(
          {options_.history_length, options_.retention, start_fields(holder_), Clock::now()});
    auto sig = jitter_pause(options_.key, options_, signals_);
    std::optional<WaitOutcome> first;  // how the run ends before its first try, if it does
    if (sig) {
      first = Interrupted{*sig};
    } else if (auto done = period_done(); !done) {
      if (!options_.wait) first = done.failure();  // its one try would have waited as long
    } else if (*done) {
      // A --once-per host that comes after the period's run ends here, without trying the lock.
      return **done;
    }
    WaitOutcome outcome =
        first ? *first : acquire(*lock_, encode_lock_value(value), options_, signals_);
    bool busy = std::holds_alternative<NotObtained>(outcome);
    if (auto status = exit_unless_obtained(outcome, options_)) {
      // Not obtained: busy, or interrupted while waiting, or Redis failed us.
      metrics_.m.result =
          std::holds_alternative<Failure>(outcome) || std::holds_alternative<NotALock>(outcome)
              ? "error"
              : "busy";
      if (busy && options_.record_skips)
        record_history(redis_, options_,
                       skipped_run(holder_, lock_->token(), RunEnd::busy, *status));
      return status;
    }
    got_ = std::get<Obtained>(outcome);
    held_.emplace(*lock_, options_.ttl, got_.sent);
    started(got_.start);
    metrics_.m.result = "acquired";
    metrics_.m.wait_seconds = std::chrono::duration<double>(got_.waited).count();
    metrics_.acquired = got_.sent;
    Event acquired{"acquired",
                   options_.key,
                   "acquired (fence " + std::to_string(got_.fence) + ")",
                   {{"fence", got_.fence}, {"waited_ms", got_.waited.count()}}};
    if (got_.waited > Millis(0) && options_.wait) {
      acquired.message = "acquired after waiting " + format_duration(got_.waited) + " (fence " +
                         std::to_string(got_.fence) + ")";
      log(Level::info, acquired);
    } else {
      log(Level::debug, acquired);
    }

    if (auto sig = signals_.next_request_to_stop()) return exit_status_for_signal(*sig);
    lease_from_ = fresh_lease(*lock_, options_.ttl, got_.sent);
    if (!lease_from_) {
      metrics_.m.result = "error";
      return k_exit_unavailable;
    }
    return std::nullopt;
  }

  // --once-per: this period's slot, claimed while we hold the lock, so no one else runs now.
  std::optional<int> claim_period() {
    // A signal that came on the way here (fresh_lease) ends the run before anything is claimed.
    if (auto sig = signals_.next_request_to_stop()) return exit_status_for_signal(*sig);
    if (!options_.once_per) return std::nullopt;
    period_.emplace(redis_, options_.key, *options_.once_per, options_.tz, options_.retry_failed);
    StartRecord start{options_.history_length, options_.retention, start_fields(holder_),
                      Clock::now() - got_.waited};
    auto claim =
        period_->claim(holder_, got_.fence, start, Clock::now() + lock_->command_timeout());
    if (claim && claim->claimed) return started(claim->start);
    held_->release();
    if (!claim) {
      metrics_.m.result = "error";
      return unavailable(claim.failure());
    }
    return done_this_period(*claim, *period_);
  }

  // --once-per: the exit status when the period has had a run that keeps this one from running
  // (PeriodGuard::finished_run, two plain reads); nothing when it has not, or when Redis
  // refused or failed the look (the lock's try meets the same and says it). A server that did
  // not answer in time is the failure returned: a run that does not wait ends on it,
  // as on its one try, so a server that hangs costs it one command timeout, not two. A run that
  // waits gives this look no more than the wait (its last try's floor at least), then tries the
  // lock for its wait, counted from then.
  Result<std::optional<int>> period_done() {
    if (!options_.once_per) return std::optional<int>{};
    PeriodGuard period(redis_, options_.key, *options_.once_per, options_.tz,
                       options_.retry_failed);
    Millis bound = lock_->command_timeout();
    if (options_.wait) bound = std::min(bound, std::max(*options_.wait, k_last_attempt_floor));
    auto done = period.finished_run(Clock::now() + bound);
    if (!done && done.failure().kind == Failure::Kind::timeout) return done.failure();
    if (done && *done) return std::optional<int>{done_this_period(**done, period)};
    return std::optional<int>{};
  }

  // The period has had its run (that of CLAIM): said, and recorded with --record-skips.
  int done_this_period(const SlotClaim& claim, const PeriodGuard& period) {
    metrics_.m.result = "done";
    log(Level::info, {"done_this_period", options_.key,
                      period_done_text(claim, period.slot_name(), options_.retry_failed)});
    if (options_.record_skips) {
      RunRecord r = skipped_run(holder_, lock_->token(), RunEnd::done_this_period,
                                options_.conflict_exit_code);
      r.period = period.slot_name();
      record_history(redis_, options_, r);
    }
    return options_.conflict_exit_code;
  }

  // Starts ARGV (found at PROGRAM, for the exec form) with the lock's environment.
  std::optional<int> start_command(const std::vector<std::string>& argv,
                                   const std::string& program) {
    Child::Spec spec{argv,
                     {"RLOCK_KEY=" + options_.key, "RLOCK_TOKEN=" + lock_->token(),
                      "RLOCK_FENCE=" + std::to_string(got_.fence),
                      "RLOCK_TTL_MS=" + std::to_string(options_.ttl.count())},
                     {},
                     program,
                     std::nullopt};
    // No Redis secret of rlock's goes to the job (README "Choosing options"): not
    // RLOCK_PASSWORD, nor a password in RLOCK_REDIS_URL. REDISCLI_AUTH, redis-cli's own, stays.
    spec.unset.push_back("RLOCK_PASSWORD");
    if (const char* url = std::getenv("RLOCK_REDIS_URL"))
      spec.env.push_back("RLOCK_REDIS_URL=" + without_password(url));
    if (options_.on_lost == RunOptions::OnLost::kill)
      spec.lease = Child::Spec::Lease{lease_deadline(*lease_from_, options_.ttl),
                                      options_.kill_signal, options_.kill_after};
    if (heartbeat_) {
      // The job's first beat is its start, however long it waited for the lock.
      if (auto problem = heartbeat_->start(Clock::now())) {
        held_->release();
        log_error("--heartbeat-file: " + *problem);
        return k_exit_usage;
      }
      spec.env.push_back("RLOCK_HEARTBEAT_FILE=" + heartbeat_->path());
    }
    // Not claimed yet (the period's slot would take the run for lost): one more look.
    if (!period_)
      if (auto sig = signals_.next_request_to_stop()) return exit_status_for_signal(*sig);
    // A waiter's status line is cleared before the command may write to the same terminal.
    if (::isatty(STDERR_FILENO)) flush_stderr(k_status_line_patience);
    terminal_ = Terminal::if_controlling();
    signals_.watch_job_control();
    // In the terminal's foreground only when rlock is: a background job's command stays there.
    child_.emplace(spec, signals_, terminal_ && terminal_->ours() ? terminal_.get() : nullptr);
    if (auto problem = child_->exec_problem()) {
      if (terminal_) terminal_->take_back();
      held_->release();
      log_error(problem->message);
      return problem->exit_status;
    }
    return std::nullopt;
  }

  // Renews the lease while the command's group runs; stops it on loss or --max-run.
  Outcome supervise() {
    // The Supervisor starts the renewal thread, which tells the guardian of every renewal.
    keeper_.emplace(*lock_, options_.ttl, *lease_from_,
                    [child = &*child_](TimePoint deadline) { child->extend_lease(deadline); });
    Outcome end = Supervisor(options_, *child_, *keeper_, signals_, terminal_.get(),
                             heartbeat_ ? &*heartbeat_ : nullptr, got_.sent)
                      .run();
    keeper_->stop();
    metrics_.m.renewals = keeper_->renewals();
    metrics_.m.renewal_failures = keeper_->renewal_failures();
    metrics_.m.losses = end.end == End::lost ? 1 : 0;
    if (terminal_) terminal_->take_back();
    child_->dismiss_guardian();
    return end;
  }

  // Records how the run ended (its period, its history) and gives the lock back, or keeps it
  // for --min-hold; returns rlock's exit status.
  int finish(const Outcome& end) {
    RunRecord record = record_of(end);
    metrics_.m.end = record.end == run_end_name(RunEnd::exited)
                         ? (record.exit_status == 0 ? "success" : "failure")
                         : record.end;
    // Redis away: the lease ran out on it (rather than an answer that the lock is not ours),
    // or it refuses us below. Each step of the way out then gets one quick try.
    bool lost_to_another = keeper_->state() == LeaseKeeper::State::not_mine;
    bool redis_away = end.end == End::lost && !lost_to_another;
    auto step_budget = [&] { return redis_away ? k_quick_attempt : lock_->command_timeout(); };
    if (period_) {
      // Before the release: the next holder must find this period's run finished, not running.
      record.period = period_->slot_name();
      if (auto done = period_->finish(record, Clock::now() + step_budget()); !done) {
        log_warning(options_.key + ": could not record the end of this period's run (" +
                    done.failure().message + "); --retry-failed would take it for lost");
        if (done.failure().kind != Failure::Kind::server) redis_away = true;
      }
    }
    std::optional<ScriptCall> history;
    if (options_.history_length > 0)
      history = history_entry(options_.key, record, options_.history_length, options_.retention);
    Millis budget = redis_away ? k_quick_attempt : k_release_budget;
    bool reached = true;
    if (end.end == End::exited)
      reached = held_->finish(options_.min_hold, &history, budget);
    else if (end.end == End::lost)
      reached = held_->release_lost(&history, budget);
    else
      reached = held_->release(&history, budget);
    if (!reached) redis_away = true;
    // No release carried it: --min-hold, a lock lost, Redlock, or Redis away.
    if (history) send_history(redis_, options_.key, *history, step_budget());
    return record.exit_status;
  }

private:
  // The run's start entry START is in the history: its end replaces it, or, should the
  // command never start, the release removes it.
  std::optional<int> started(const std::string& start) {
    got_.start = start;
    if (!start.empty()) held_->forget_start(history_forget(options_.key, lock_->token(), start));
    return std::nullopt;
  }

  RunRecord record_of(const Outcome& end) const {
    RunRecord record;
    record.holder = holder_;
    record.holder.since = WallTime(Millis(got_.taken_ms));  // the server's, when it was taken
    record.start = got_.start;
    record.token = lock_->token();
    record.fence = got_.fence;
    record.waited_ms = got_.waited.count();
    record.held_ms = std::chrono::duration_cast<Millis>(Clock::now() - got_.sent).count();
    switch (end.end) {
    case End::exited:
      record.exit_status = end.child_status;
      record.end = run_end_name(end.signalled ? RunEnd::signalled : RunEnd::exited);
      break;
    case End::lost:
      record.exit_status = k_exit_lost;
      record.end = run_end_name(RunEnd::lost);
      break;
    case End::max_run:
      record.exit_status = k_exit_max_run;
      record.end = run_end_name(RunEnd::max_run);
      break;
    case End::hung:
      record.exit_status = k_exit_hung;
      record.end = run_end_name(RunEnd::hung);
      break;
    }
    return record;
  }

  const RunOptions& options_;
  Redis& redis_;
  std::optional<Heartbeat> heartbeat_;
  SignalEvents signals_;  // before any thread or child exists: they inherit the mask
  std::unique_ptr<Lock> lock_;
  const Holder holder_;
  MetricsRecorder metrics_;
  Obtained got_{};
  std::optional<HeldLock> held_;
  std::optional<TimePoint> lease_from_;  // when the lease the command starts on began
  std::optional<PeriodGuard> period_;
  std::unique_ptr<Terminal> terminal_;
  std::optional<Child> child_;
  std::optional<LeaseKeeper> keeper_;
};

}  // namespace

int run_verb(const GlobalOptions& global, const RunOptions& options) {
  if (options.shared && options.once_per)
    throw usage_error("--shared excludes --once-per: one run a period leaves no one to share the "
                      "lock with");
  std::vector<std::string> argv = command_argv(options);
  std::string program;
  if (auto refused = refuse_unrunnable(options, argv, &program)) return *refused;
  std::optional<Heartbeat> heartbeat;
  if (options.heartbeat_file) {
    // A file that cannot be made is a mistake to report before the lock is taken.
    heartbeat.emplace(absolute_path(*options.heartbeat_file), *options.stale_after);
    if (auto problem = heartbeat->check()) throw usage_error("--heartbeat-file: " + *problem);
  }

  try {
    auto redis = connect_redis(global);
    check_topology(*redis, options);
    if (inherited_token(*redis, options)) return exec_straight_through(argv);

    Run run(options, *redis, std::move(heartbeat));
    if (auto status = run.take()) return *status;
    if (auto status = run.claim_period()) return *status;
    if (auto status = run.start_command(argv, program)) return *status;
    return run.finish(run.supervise());
  } catch (Error& e) {
    // rlock's own failure (out of descriptors, say) names the lock; it was given back.
    if (e.exit_status() == k_exit_internal) e.set_key(options.key);
    throw;
  }
}

namespace {

struct RunArgs : Arguments {
  std::string key;
  std::optional<std::string> shell_command;

  void check(const std::vector<std::string>& command) const override {
    if (shell_command && !command.empty())
      throw usage_error("give either -c 'TEXT' or -- COMMAND, not both");
    if (!shell_command && command.empty())
      throw usage_error("missing command: rlock run KEY -- COMMAND [ARG...], or -c 'TEXT'");
  }

  int run(const Invocation& in) override {
    RunOptions options = std::move(in.resolved.run);
    options.key = in.key(key);
    options.command = in.command;
    options.shell_command = shell_command;
    return run_verb(in.resolved.global, options);
  }
};

constexpr Option k_options[] = {
    option<&RunArgs::key>("KEY", k_key_help).must(),
    option<&RunArgs::shell_command>(
        "-c,--command", "run TEXT with $SHELL -c (or /bin/sh) instead of COMMAND", "TEXT")};

}  // namespace

constexpr Command k_run_command = {
    "run",
    "hold KEY while COMMAND runs",
    "KEY -- COMMAND [ARG...]\nKEY -c 'SHELL TEXT'",
    {k_options, k_waiting, k_running, k_connection},
    "COMMAND is exec'd as given, without a shell; -c TEXT is run by $SHELL -c (or /bin/sh).\n"
    "The command gets RLOCK_KEY, RLOCK_TOKEN, RLOCK_FENCE and RLOCK_TTL_MS (and "
    "RLOCK_HEARTBEAT_FILE).\n"
    "Exit status: the command's own; 64 usage, 69 Redis unavailable, 75 busy (-E changes it), "
    "76 lock lost, 78 configuration, 79 hung (--heartbeat-file), 124 --max-run, 125 rlock "
    "failed, 126 not executable, 127 not found.",
    make_arguments<RunArgs>,
    /*takes_command=*/true};

}  // namespace rlock
