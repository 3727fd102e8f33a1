// rlock run: hold KEY while a command runs. Joins the lock protocol (wait.h, lease.h) to the
// child process (child.h); the child runs only while the lease holds.
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "child.h"
#include "history.h"
#include "lease.h"
#include "lock.h"
#include "lock_value.h"
#include "log.h"
#include "metrics.h"
#include "output.h"
#include "redis.h"
#include "signals.h"
#include "terminal.h"
#include "text.h"
#include "verbs/verbs.h"
#include "wait.h"

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
// How soon to try again when the renewal thread could not be started.
constexpr Millis k_keeper_retry{100};
// Time allowed to give the lock back at the end, across retries (a Redis restart, a failover).
constexpr Millis k_release_budget{5000};
// Time allowed for each step of the way out (the period's record, the release, the history)
// once Redis is known to be away: the lease ran out on it, or it refused us. One quick try,
// then exit: scripts and systemd wait for rlock, not for a server that is not there.
constexpr Millis k_quick_attempt{300};

enum class End { exited, lost, max_run };

struct Outcome {
  End end;
  int child_status;
};

// Watches the child, the lease and incoming signals until the child's whole process group has
// ended: the command, and whatever it left running there (flock(1) keeps its lock while any
// process that inherited it lives), which --leftovers kill stops instead.
class Supervisor {
public:
  Supervisor(const RunOptions& options, Child& child, LeaseKeeper& keeper, SignalEvents& signals,
             Terminal* terminal, TimePoint started)
      : options_(options), child_(child), keeper_(keeper), signals_(signals), terminal_(terminal),
        kill_after_(options.kill_after.value_or(default_kill_after(options.ttl))),
        keeper_start_at_(keeper.start_due()) {
    if (options.max_run) max_run_at_ = started + *options.max_run;
  }

  Outcome run() {
    for (;;) {
      TimePoint now = Clock::now();
      if (child_status_ && group_done(now))
        return {stopping_ ? stopping_->why : End::exited, *child_status_};
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
          {"leftovers", key(),
           kill ? "the command exited; stopping the " + what + " it left in its process group"
                : "the command exited; holding the lock until the " + what +
                      " it left in its process group exit (--leftovers kill stops them)",
           {{"processes", live}}});
      if (kill && !stopping_) begin_stop(End::exited, now + kill_after_, options_.kill_signal);
    }
    return false;
  }

  // While anything of the command's group runs, the lease and --max-run hold for it.
  void decide(TimePoint now) {
    if (!keeper_.started() && now >= keeper_start_at_) start_keeper(now);
    check_lease(now);
    if (max_run_at_ && now >= *max_run_at_ && !stopping_) {
      log(Level::error, {"max_run", key(),
                         "the command ran past --max-run " + format_duration(*options_.max_run) +
                             "; stopping it"});
      begin_stop(End::max_run, now + kill_after_, options_.kill_signal);
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
    LeaseKeeper::State state = keeper_.state();
    TimePoint deadline = keeper_.deadline();
    if (state == LeaseKeeper::State::held && now < loss_threshold()) return;
    lost_ = true;
    if (options_.on_lost == RunOptions::OnLost::ignore) {
      log(Level::error, {"lost_ignored", key(),
                         "lock lost; --on-lost ignore: the command keeps running without it"});
      return;
    }
    if (state == LeaseKeeper::State::expired || now >= deadline) {
      // Past the deadline the key may already be someone else's: no grace period.
      log(Level::error,
          {"lost", key(),
           "lock lost (the lease ran out, e.g. rlock was frozen); killing the command"});
      begin_stop(End::lost, now, SIGKILL);
    } else if (state == LeaseKeeper::State::not_mine) {
      log(Level::error,
          {"lost", key(),
           "lock lost (the key is gone or holds another token); stopping the command"});
      begin_stop(End::lost, now + kill_after_, options_.kill_signal);
    } else {
      // Redis unreachable: SIGKILL must land by the deadline, before the key can expire there.
      log(Level::error, {"lost", key(),
                         "lock lost (no renewal succeeded; the lease ends in " +
                             format_duration(std::chrono::duration_cast<Millis>(deadline - now)) +
                             "); stopping the command"});
      begin_stop(End::lost, deadline, options_.kill_signal);
    }
  }

  // When an unrenewed lease counts as lost: with --on-lost kill, early enough that SIGKILL
  // (kill-after after the kill signal) lands by the deadline; with ignore, at the deadline.
  TimePoint loss_threshold() const {
    TimePoint deadline = keeper_.deadline();
    return options_.on_lost == RunOptions::OnLost::kill ? deadline - kill_after_ : deadline;
  }

  void begin_stop(End why, TimePoint kill_at, int sig) {
    if (stopping_) {
      // Already stopping for --max-run: a loss is the graver reason and may be more urgent.
      stopping_->why = why;
      stopping_->kill_at = std::min(stopping_->kill_at, kill_at);
    } else {
      stopping_ = Stopping{why, kill_at};
    }
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

  void collect_child() {
    while (auto event = child_.poll()) {
      if (event->kind == Child::Event::Kind::exited) {
        child_status_ = event->status;
        return;
      }
      if (terminal_) suspend_with_child(event->status);
    }
  }

  // Ctrl-Z stopped the child, which owns the terminal: give the terminal back to the shell and
  // stop rlock too, so the shell sees its job stopped; on `fg`, resume the child (as sudo does).
  // While rlock is stopped it cannot renew: a stop longer than the lease loses the lock.
  void suspend_with_child(int stop_signal) {
    terminal_->take_back();
    ::kill(::getpid(), stop_signal == SIGSTOP ? SIGSTOP : SIGTSTP);
    terminal_->hand_to(child_.pid());
    child_.signal_group(SIGCONT);
  }

  const std::string& key() const { return options_.key; }

  const RunOptions& options_;
  Child& child_;
  LeaseKeeper& keeper_;
  SignalEvents& signals_;
  Terminal* terminal_;
  const Millis kill_after_;
  TimePoint keeper_start_at_;
  bool keeper_failed_ = false;
  std::optional<TimePoint> max_run_at_;
  std::optional<Stopping> stopping_;
  std::optional<TimePoint> killed_at_;
  std::optional<int> child_status_;
  bool lost_ = false;
  bool leftovers_found_ = false;
  Millis group_poll_ = k_group_poll_first;
};

// Adds this run to --metrics-file when rlock is done with it, on every path out of run_verb. A
// file that cannot be written is a warning: metrics never fail the job.
struct MetricsRecorder {
  explicit MetricsRecorder(const RunOptions& options) : path(options.metrics_file) {
    m.key = options.key;
    m.result = "error";
  }
  ~MetricsRecorder() {
    if (!path) return;
    if (acquired) m.hold_seconds = std::chrono::duration<double>(Clock::now() - *acquired).count();
    std::string problem = record_metrics(*path, m);
    if (!problem.empty()) log_warning("--metrics-file: " + problem);
  }
  std::optional<std::string> path;
  RunMetrics m;
  std::optional<TimePoint> acquired;
};

// A history entry that could not be written: one warning, never the job's failure.
void warn_history(const std::string& key, const std::string& why) {
  log_warning(key + ": could not record the run in its history (" + why + ")");
}

// Gives the lock back, retrying through a Redis blip for up to BUDGET, but not after Redis
// refused the connection. A lock we cannot release expires by itself within the ttl; say so.
// HISTORY, the run's history entry, rides in the release's round trip (after the release: it
// delays no one) and is cleared once Redis answered it. Returns false when Redis could not be
// reached.
bool release(Lock& lock, Millis ttl, std::optional<Argv>* history = nullptr,
             Millis budget = k_release_budget) {
  TimePoint give_up = Clock::now() + std::min(ttl, budget);
  for (;;) {
    TimePoint deadline = std::min(Clock::now() + lock.command_timeout(), give_up);
    std::vector<Reply> then;
    auto released =
        history && *history ? lock.release(deadline, {**history}, &then) : lock.release(deadline);
    if (!then.empty()) {
      if (then.front().type == Reply::Type::error)
        warn_history(lock.key(), lock.redis().server_failure(then.front().str).message);
      history->reset();
    }
    if (released) {
      if (*released)
        log(Level::debug, {"released", lock.key(), "released"});
      else
        log(Level::warning, {"not_ours_at_release", lock.key(),
                             "the lock was no longer ours at release (it expired or was "
                             "taken); the run may have overlapped another"});
      return true;
    }
    Failure::Kind kind = released.failure().kind;
    if (kind == Failure::Kind::server || kind == Failure::Kind::connect ||
        Clock::now() >= give_up) {
      log(Level::warning, {"release_failed", lock.key(),
                           "could not release (" + released.failure().message +
                               "); it expires within " + format_duration(ttl)});
      return kind == Failure::Kind::server;
    }
    ::poll(nullptr, 0, static_cast<int>(k_retry_interval.count()));
  }
}

// After a normal end: release, or keep the lock until --min-hold after acquisition. False when
// Redis could not be reached.
bool finish(Lock& lock, const RunOptions& options, TimePoint acquired,
            std::optional<Argv>* history, Millis budget) {
  if (options.min_hold) {
    auto held = std::chrono::duration_cast<Millis>(Clock::now() - acquired);
    if (held < *options.min_hold) {
      Millis rest = *options.min_hold - held;
      auto kept = lock.renew(rest, Clock::now() + lock.command_timeout());
      if (kept && *kept) {
        log(Level::debug, {"kept_for_min_hold",
                           lock.key(),
                           "keeping it " + format_duration(rest) + " more (--min-hold)",
                           {{"ms", rest.count()}}});
        return true;
      }
    }
  }
  return release(lock, options.ttl, history, budget);
}

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

// A history entry for a run that did not happen: END says why, STATUS is what rlock exits with.
RunRecord skipped(const Holder& holder, const char* end, int status) {
  RunRecord r;
  r.holder = holder;
  r.end = end;
  r.exit_status = status;
  return r;
}

// Sends ENTRY (history_entry()) on its own round trip, within BUDGET; a failure is one warning.
void send_history(Redis& redis, const std::string& key, const Argv& entry,
                  std::optional<Millis> budget = std::nullopt) {
  auto done = redis.call(entry, Clock::now() + budget.value_or(redis.command_timeout()));
  if (!done) warn_history(key, done.failure().message);
}

// Appends to the key's history; a failure is one warning, never the job's.
void record_history(Redis& redis, const RunOptions& options, const RunRecord& record) {
  if (options.history_length > 0)
    send_history(redis, options.key, history_entry(options.key, record, options.history_length));
}

// Why a --once-per run does not run: who ran it this period, and how that went.
std::string done_message(const SlotClaim& c, const PeriodGuard& period, const RunOptions& options) {
  std::string how = c.state == "running" ? "it never reported its end (lost)"
                    : c.status == "0"    ? "it succeeded"
                    : c.end == "exited"  ? "it exited with status " + c.status
                                         : "it ended: " + c.end + " (" + c.status + ")";
  std::string hint =
      options.retry_failed || c.status == "0" ? "" : "; --retry-failed would run it again";
  return "already run this period (" + period.slot_name() + ") on " + c.host + " at " + c.since +
         ": " + how + hint;
}

// The nested run of a lock this process tree holds: become the command, which runs under the
// outer rlock's lock and lease.
int exec_straight_through(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execvp(args[0], args.data());
  int err = errno;
  log_error(argv[0] + ": " + std::strerror(err));
  return err == ENOENT ? k_exit_not_found : k_exit_not_executable;
}

}  // namespace

int run_verb(const GlobalOptions& global, const RunOptions& options) {
  std::vector<std::string> argv = command_argv(options);
  // A command that cannot run must not take the lock (and a typo must not keep others out).
  std::string program;  // where the exec form's command is: the child need not search again
  if (!options.shell_command) {
    if (is_assignment_word(argv.front())) {
      // Not a program but a shell's assignment, whose value may be a secret: not printed.
      std::string name = argv.front().substr(0, argv.front().find('='));
      log_error(name + "=...: an assignment is not a command (run `env " + name +
                "=... COMMAND`, or give the line to a shell with -c)");
      return k_exit_not_found;
    }
    if (auto problem = check_command(argv.front(), &program)) {
      log_error(problem->message);
      return problem->exit_status;
    }
  }

  auto redis = connect_redis(global);
  check_topology(*redis, options);
  if (inherited_token(*redis, options)) return exec_straight_through(argv);

  SignalEvents signals;  // before any thread or child exists: they inherit the mask
  auto owned_lock = make_lock(*redis, options.key, make_token(), lock_mode(options));
  Lock& lock = *owned_lock;
  LockValue value{lock.token(), current_holder(command_name(options)), std::nullopt};
  MetricsRecorder metrics(options);

  WaitOutcome outcome = acquire(lock, encode_lock_value(value), options.ttl, options.wait, signals);
  if (auto status = exit_unless_obtained(outcome, options)) {
    // Not obtained: busy, or interrupted while waiting, or Redis failed us.
    bool busy = std::holds_alternative<NotObtained>(outcome);
    metrics.m.result =
        std::holds_alternative<Failure>(outcome) || std::holds_alternative<NotALock>(outcome)
            ? "error"
            : "busy";
    if (busy && options.record_skips)
      record_history(*redis, options, skipped(value.holder, "busy", *status));
    return *status;
  }
  const auto& got = std::get<Obtained>(outcome);
  metrics.m.result = "acquired";
  metrics.m.wait_seconds = std::chrono::duration<double>(got.waited).count();
  metrics.acquired = got.sent;
  if (got.waited > Millis(0) && options.wait)
    log(Level::info, {"acquired",
                      options.key,
                      "acquired after waiting " + format_duration(got.waited) + " (fence " +
                          std::to_string(got.fence) + ")",
                      {{"fence", got.fence}, {"waited_ms", got.waited.count()}}});
  else
    log(Level::debug, {"acquired",
                       options.key,
                       "acquired (fence " + std::to_string(got.fence) + ")",
                       {{"fence", got.fence}, {"waited_ms", got.waited.count()}}});

  // From here the lock is ours: every path gives it back (or keeps it for --min-hold).
  if (auto sig = signals.next(); sig && *sig != SIGCHLD) {
    release(lock, options.ttl);
    return exit_status_for_signal(*sig);
  }
  auto lease_from = fresh_lease(lock, options.ttl, got.sent);
  if (!lease_from) {
    metrics.m.result = "error";
    release(lock, options.ttl);
    return k_exit_unavailable;
  }
  // --once-per: this period's slot, claimed while we hold the lock, so no one else runs now.
  std::optional<PeriodGuard> period;
  if (options.once_per) {
    period.emplace(*redis, options.key, *options.once_per, options.tz, options.retry_failed);
    auto claim = period->claim(value.holder, got.fence, Clock::now() + lock.command_timeout());
    if (!claim || !claim->claimed) {
      metrics.m.result = claim ? "done" : "error";
      release(lock, options.ttl);
      if (!claim) return unavailable(claim.failure());
      log(Level::info, {"done_this_period", options.key, done_message(*claim, *period, options)});
      if (options.record_skips) {
        RunRecord r = skipped(value.holder, "done-this-period", options.conflict_exit_code);
        r.period = period->slot_name();
        record_history(*redis, options, r);
      }
      return options.conflict_exit_code;
    }
  }
  Child::Spec spec{argv,
                   {"RLOCK_KEY=" + options.key, "RLOCK_TOKEN=" + lock.token(),
                    "RLOCK_FENCE=" + std::to_string(got.fence),
                    "RLOCK_TTL_MS=" + std::to_string(options.ttl.count())},
                   program};
  auto terminal = Terminal::if_foreground();
  std::optional<Child> child;
  try {
    child.emplace(spec, signals, terminal.get());
  } catch (...) {
    release(lock, options.ttl);
    throw;
  }
  if (child->exec_problem()) {
    if (terminal) terminal->take_back();
    release(lock, options.ttl);
    log_error(child->exec_problem()->message);
    return child->exec_problem()->exit_status;
  }

  LeaseKeeper keeper(lock, options.ttl, *lease_from);  // the Supervisor starts its thread
  Outcome end{};
  try {
    end = Supervisor(options, *child, keeper, signals, terminal.get(), got.sent).run();
  } catch (...) {
    // rlock's own failure (out of memory ...): the Child's destructor stops the command;
    // the lock goes back now rather than at its expiry.
    keeper.stop();
    if (terminal) terminal->take_back();
    release(lock, options.ttl);
    throw;
  }
  keeper.stop();
  metrics.m.renewals = keeper.renewals();
  metrics.m.renewal_failures = keeper.renewal_failures();
  metrics.m.losses = end.end == End::lost ? 1 : 0;
  if (terminal) terminal->take_back();
  child->dismiss_guardian();

  RunRecord record;
  record.holder = value.holder;
  record.fence = got.fence;
  record.waited_ms = got.waited.count();
  record.held_ms = std::chrono::duration_cast<Millis>(Clock::now() - got.sent).count();
  switch (end.end) {
  case End::exited:
    record.exit_status = end.child_status;
    record.end = end.child_status > 128 ? "signalled" : "exited";
    break;
  case End::lost:
    record.exit_status = k_exit_lost;
    record.end = "lost";
    break;
  case End::max_run:
    record.exit_status = k_exit_max_run;
    record.end = "max-run";
    break;
  }
  // Redis away: the lease ran out on it (rather than an answer that the lock is not ours), or
  // it refuses us below. Each step of the way out then gets one quick try.
  bool redis_away = end.end == End::lost && keeper.state() != LeaseKeeper::State::not_mine;
  auto step_budget = [&] { return redis_away ? k_quick_attempt : lock.command_timeout(); };
  if (period) {
    // Before the release: the next holder must find this period's run finished, not running.
    record.period = period->slot_name();
    if (auto done = period->finish(record, Clock::now() + step_budget()); !done) {
      log_warning(options.key + ": could not record the end of this period's run (" +
                  done.failure().message + "); --retry-failed would take it for lost");
      if (done.failure().kind != Failure::Kind::server) redis_away = true;
    }
  }
  std::optional<Argv> history;
  if (options.history_length > 0)
    history = history_entry(options.key, record, options.history_length);
  Millis release_budget = redis_away ? k_quick_attempt : k_release_budget;
  bool reached = true;
  switch (end.end) {
  case End::exited: reached = finish(lock, options, got.sent, &history, release_budget); break;
  case End::lost:
    // Not ours any more, or maybe still ours after an outage: the compare-and-delete is safe
    // either way and spares the next holder the wait for the expiry.
    if (keeper.state() != LeaseKeeper::State::not_mine)
      reached = release(lock, options.ttl, &history, release_budget);
    break;
  case End::max_run: reached = release(lock, options.ttl, &history, release_budget); break;
  }
  if (!reached) redis_away = true;
  // No release carried it: --min-hold, a lock lost, Redlock, or Redis away.
  if (history) send_history(*redis, options.key, *history, step_budget());
  return record.exit_status;
}

}  // namespace rlock
