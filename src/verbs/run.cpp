// rlock run: hold KEY while a command runs. Joins the lock protocol (wait.h, lease.h) to the
// child process (child.h); the child runs only while the lease holds.
#include <unistd.h>

#include <system_error>

#include "lock/held_lock.h"
#include "lock/history.h"
#include "lock/lease.h"
#include "lock/lock.h"
#include "lock/lock_value.h"
#include "lock/pause.h"
#include "print/metrics.h"
#include "print/print.h"
#include "print/print_text.h"
#include "process/child.h"
#include "process/heartbeat.h"
#include "process/signals.h"
#include "process/terminal.h"
#include "redis/redis.h"
#include "run/command.h"
#include "run/hold.h"
#include "run/notify.h"
#include "run/output_relay.h"
#include "run/records.h"
#include "run/supervisor.h"
#include "run/wait.h"
#include "util/log.h"
#include "util/stderr_writer.h"
#include "verbs/command.h"
#include "verbs/verbs.h"

namespace rlock {

namespace {

// Time allowed for the way out (the period's record, the release, the history), through a
// restart or a failover (rlock-run(1) "Lease safety"): past it the run's end is unknown to
// every reader, and rlock says so.
constexpr Millis k_end_budget{10000};
// The same once Redis is known to be away: the lease ran out on it. One quick try, then exit:
// scripts and systemd wait for rlock, not for a server that was not there for a whole lease.
constexpr Millis k_quick_attempt{300};
// How long the command's start may wait for rlock's stderr to take a waiter's last status line.
constexpr Millis k_status_line_patience{100};

// One run of the command under the lock, step by step (run_verb tells the order). Each step
// returns the exit status when the run ends there. What the run holds lets go in the order
// RunHold says, on any way out; the metrics are written after that (MetricsRecorder).
class Run {
public:
  // SIGNALS: rlock's. REPORT gets what the run did as it goes (--notify). CONNECT makes the
  // connections of rlock stop's listener, the output's sender and the side lock.
  Run(const RunOptions& options, Redis& redis, std::optional<Heartbeat> heartbeat,
      SignalEvents& signals, RunReport& report, StopListener::Connect connect)
      : options_(options), redis_(redis), heartbeat_(std::move(heartbeat)), signals_(signals),
        report_(report), connect_(std::move(connect)),
        lock_(make_lock(redis, options.key, make_token(), lock_mode(options))),
        holder_(current_holder(command_name(options))), command_timeout_(lock_->command_timeout()),
        metrics_(options) {
    report_.host = holder_.host;
    if (options_.once_per)
      period_.emplace(redis_, options_.key, *options_.once_per, options_.tz, options_.retry_failed);
  }

  // Takes the lock (waiting as --wait says), on a lease with time to run the command on.
  std::optional<int> take() {
    LockValue value{lock_->token(), holder_, std::nullopt, options_.ttl.count(), std::nullopt};
    if (options_.history_length > 0 && !options_.once_per)  // --once-per: at the claim instead
      lock_->record_start(
          {options_.history_length, options_.retention, start_fields(holder_), Clock::now()});
    std::optional<WaitOutcome> first;  // how the run ends before its first try, if it does
    if (auto sig = jitter_pause(options_.key, options_, signals_)) {
      first = Interrupted{*sig};
    } else if (auto done = period_done(); !done) {
      if (!options_.wait) first = done.failure();  // its one try would have waited as long
    } else if (*done) {
      // A --once-per host that comes after the period's run ends here, without trying the lock.
      return **done;
    }
    // A --once-per waiter woken by the period's run, as it ends, is done: it never takes the
    // lock only to give it back (watch would show it as a run).
    std::optional<int> done_meanwhile;
    auto still_wanted = [&] {
      if (!options_.once_per) return true;
      auto done = period_done();
      if (done && *done) done_meanwhile = **done;
      return !done_meanwhile;
    };
    WaitOutcome outcome =
        first ? *first
              : acquire(*lock_, encode_lock_value(value), options_, signals_, still_wanted);
    if (done_meanwhile) return *done_meanwhile;
    if (auto status = exit_unless_obtained(outcome, options_)) {
      // Not obtained: busy or paused, interrupted while waiting (told as busy), or an error.
      auto* busy = std::get_if<NotObtained>(&outcome);
      bool failed =
          std::holds_alternative<Failure>(outcome) || std::holds_alternative<NotALock>(outcome);
      metrics_.m.result = failed ? Acquisition::error : Acquisition::busy;
      if (!failed) report_.end = busy && busy->paused ? RunEnd::paused : RunEnd::busy;
      if (busy) record_skip(*report_.end, *status, busy);
      return status;
    }
    got_ = std::get<Obtained>(outcome);
    holder_.since = WallTime(Millis(got_.taken_ms));  // the server's clock, as it was taken
    report_.fence = got_.fence;
    hold_.emplace(*lock_, options_.ttl, got_.sent);
    started(got_.start);
    metrics_.m.result = Acquisition::acquired;
    metrics_.m.wait_seconds = std::chrono::duration<double>(got_.waited).count();
    metrics_.acquired = got_.sent;
    log_acquired(options_, got_.fence, got_.waited);

    if (auto sig = signals_.next_request_to_stop()) return exit_status_for_signal(*sig);
    lease_from_ = fresh_lease(*lock_, options_.ttl, got_.sent);
    if (!lease_from_) {
      metrics_.m.result = Acquisition::error;
      return k_exit_unavailable;
    }
    return std::nullopt;
  }

  // --once-per: this period's slot, claimed while we hold the lock, so no one else runs now.
  std::optional<int> claim_period() {
    // A signal that came on the way here (fresh_lease) ends the run before anything is claimed.
    if (auto sig = signals_.next_request_to_stop()) return exit_status_for_signal(*sig);
    if (!period_) return std::nullopt;
    StartRecord start{options_.history_length, options_.retention, start_fields(holder_),
                      Clock::now() - got_.waited};
    auto claim = period_->claim(holder_, got_.fence, start, Clock::now() + command_timeout_);
    if (claim && claim->claimed) return started(claim->start);
    hold_.reset();  // given back before anything is said or recorded
    if (!claim) {
      metrics_.m.result = Acquisition::error;
      return unavailable(claim.failure());
    }
    return done_this_period(*claim);
  }

  // --once-per: the exit status when the period has had its run; nothing when it has not, or
  // when the look failed (the lock's try meets it too), but for a timeout, returned: a hung
  // server costs one command timeout, not two. A run that waits gives the look its wait (the
  // last try's floor at least), then tries the lock for its wait, counted from then.
  Result<std::optional<int>> period_done() {
    if (!period_) return std::optional<int>{};
    Millis bound = command_timeout_;
    if (options_.wait) bound = std::min(bound, std::max(*options_.wait, k_last_attempt_floor));
    auto done = period_->finished_run(Clock::now() + bound);
    if (!done && done.failure().kind == Failure::Kind::timeout) return done.failure();
    if (done && *done) return std::optional<int>{done_this_period(**done)};
    return std::optional<int>{};
  }

  // The period has had its run (that of CLAIM): said, and recorded with --record-skips.
  int done_this_period(const SlotClaim& claim) {
    metrics_.m.result = Acquisition::done;
    report_.end = RunEnd::done_this_period;
    log(Level::info, {"done_this_period", options_.key,
                      period_done_text(claim, period_->slot_name(), options_.retry_failed)});
    record_skip(RunEnd::done_this_period, options_.conflict_exit_code);
    return options_.conflict_exit_code;
  }

  // --record-skips: the history says this run did not run, and ended as END with exit STATUS:
  // kept out by a holder or a pause (BUSY: who paused, and why), or by the period's run.
  void record_skip(RunEnd end, int status, const NotObtained* busy = nullptr) {
    if (!options_.record_skips) return;
    RunRecord r = skipped_run(holder_, lock_->token(), end, status);
    if (auto pause = busy && busy->paused ? decode_pause(busy->holder_value) : std::nullopt) {
      r.by = pause->by;
      r.reason = pause->reason;
    }
    if (end == RunEnd::done_this_period) r.period = period_->slot_name();
    record_history(redis_, options_, r);
  }

  // Starts ARGV (at PROGRAM, for the exec form) with the lock's environment and --keep-output.
  std::optional<int> start_command(const std::vector<std::string>& argv,
                                   const std::string& program) {
    Child::Spec& spec = hold_->spec;
    spec = command_spec(options_, argv, program, lock_->token(), got_.fence);
    if (options_.on_lost == RunOptions::OnLost::kill)
      spec.lease = Child::Spec::Lease{lease_deadline(*lease_from_, options_.ttl),
                                      options_.kill_signal, options_.kill_after};
    if (heartbeat_) {
      // The job's first beat is its start, however long it waited for the lock.
      if (auto problem = heartbeat_->start(Clock::now())) {
        log_error("--heartbeat-file: " + *problem);
        return k_exit_usage;
      }
      spec.env.push_back("RLOCK_HEARTBEAT_FILE=" + heartbeat_->path());
    }
    // A signal meanwhile ends the run here, but not once a period's slot is claimed (then lost).
    if (!period_)
      if (auto sig = signals_.next_request_to_stop()) return exit_status_for_signal(*sig);
    // A waiter's status line is cleared before the command may write to the same terminal.
    if (::isatty(STDERR_FILENO)) flush_stderr(k_status_line_patience);
    hold_->keep_terminal(Terminal::if_controlling());
    signals_.watch_job_control();
    output_ = OutputRelay::make(options_, connect_, got_.fence,
                                encode_lock_value({lock_->token(), holder_, got_.fence,
                                                   options_.ttl.count(), std::nullopt}),
                                spec);
    try {
      hold_->start(signals_);
    } catch (const Error& e) {
      if (!output_) throw;
      // The capture's pipes took what the command needed (ulimit -n): the job goes first.
      log_warning(options_.key + ": " + e.what() +
                  "; starting the command without keeping its output");
      output_.reset();
      spec.stdout_fd = spec.stderr_fd = -1;
      hold_->start(signals_);
    }
    if (auto problem = hold_->child().exec_problem()) {
      log_error(problem->message);
      return problem->exit_status;
    }
    // --retry: the capture's pipes stay open for the next attempts, until the run's end.
    if (output_) output_->spawned(options_.retry > 0);
    return std::nullopt;
  }

  // Renews the lease while the command's group runs, and under --retry runs it again while
  // attempts are left and its end is worth another; stops it on loss, --max-run or request.
  AttemptEnd supervise() {
    Renewals& renewals = hold_->renew(*lock_, options_.ttl, *lease_from_);
    Supervisor supervisor(options_,
                          {renewals, signals_, hold_->terminal(),
                           heartbeat_ ? &*heartbeat_ : nullptr,
                           listen_for_stops(stops_, connect_, *lock_)},
                          got_.sent);
    AttemptEnd end = supervisor.watch(hold_->child());
    while (auto delay = again(end, supervisor.lost())) {
      TimePoint next_at = Clock::now() + *delay;
      supervisor.announce({.kind = RunPhase::Kind::retrying,
                           .attempt = attempt_ + 1,
                           .attempts = options_.retry + 1,
                           .last_status = end.status,
                           .since = Clock::now(),
                           .due = next_at});
      if (auto ended = supervisor.wait_until(next_at, end, hold_->child())) {
        end = *ended;
        break;
      }
      end.between_attempts = true;  // should the next attempt not start
      // One look at Redis: a loss the renewals have not met yet (--on-lost ignore's too).
      if (auto held = side_lock().holds(Clock::now() + command_timeout_); held && !*held) {
        log(Level::error, {"lost", options_.key, "lock lost between attempts: no more attempts"});
        end.end = RunEnd::lost;
        not_ours_ = true;  // Redis said so: not a lease that ran out on an absent Redis
        break;
      }
      Child* next = start_next();
      if (!next) break;  // the run ends as the last attempt did
      if (auto problem = next->exec_problem()) {
        // Gone or no longer executable since the first attempt: that attempt ends at once.
        log_error(problem->message);
        end = AttemptEnd{.status = problem->exit_status};
        continue;
      }
      end = supervisor.watch(*next);
    }
    hold_->command_done();  // the group is gone: a Ctrl-C while the output drains reaches rlock
    if (output_) drain_output(end);
    stops_.reset();
    metrics_.m.losses = end.end == RunEnd::lost ? 1 : 0;
    return end;
  }

  // The rest of the command's output is written on, the lease renewed, and its end sent before
  // the release: a follower sees it before anyone can take the lock. A reader that does not read
  // holds the run until rlock is asked to stop, then for k_stop_grace at most; a stop request
  // that comes meanwhile ends the run as stopped (its asker is told so), a signal as it ended.
  void drain_output(AttemptEnd& end) {
    // The renewal thread starts at the first renewal (Renewals::start_due), which a drain may
    // outlast; one that cannot start is said, and the lease runs out.
    if (!hold_->renewing()) try {
        hold_->renewals().start();
      } catch (const std::system_error& e) {
        log_warning(options_.key + ": cannot start the renewal thread (" + e.what() + ")");
      }
    std::optional<StopRequest> late_stop;
    output_->drain([&] {
      if (stops_ && !late_stop) late_stop = stops_->take();
      return end.asked_to_stop || late_stop || signals_.next_request_to_stop().has_value();
    });
    if (late_stop && command_ended(end.end) && !end.between_attempts)
      end = AttemptEnd{
          .end = RunEnd::stopped, .status = end.status, .stop = late_stop, .asked_to_stop = true};
    output_->send_end(run_end_name(end.end), run_end_exit_status(end.end, end.status, end.status),
                      command_timeout_);
  }

  // Records how the run ended (its period, its history) and gives the lock back, or keeps it
  // for --min-hold; returns rlock's exit status.
  int finish(const AttemptEnd& end) {
    RunRecord record = record_of(end);
    // The run ended between attempts as the last attempt did: that end is recorded already.
    bool recorded = end.between_attempts && command_ended(end.end);
    // Redis away: the lease ran out on it (rather than an answer that the lock is not ours).
    bool lost_to_another = not_ours_ || hold_->renewals().state() == Renewals::State::not_mine;
    bool redis_away = end.end == RunEnd::lost && !lost_to_another;
    // Each step gets what is left of one budget, sent again through a restart or a failover.
    TimePoint give_up = Clock::now() + (redis_away ? k_quick_attempt : k_end_budget);
    auto left = [&] { return Millis(millis_until(give_up)); };
    report_.end = end.end;
    if (end.end == RunEnd::lost) {
      hold_->stop_renewals();  // nothing left to renew
      if (lost_to_another && record_breaker(*lock_, record)) report_.end = RunEnd::broken;
    }
    if (!recorded) metrics_.add_cost(record);
    metrics_.m.end = run_end_label(*report_.end, record.exit_status);
    report_.duration = Millis(record.held_ms);
    report_.attempt = record.attempt;
    if (period_) finish_period(record, give_up);
    hold_->stop_renewals();
    metrics_.m.renewals = hold_->renewals().renewals();
    metrics_.m.renewal_failures = hold_->renewals().renewal_failures();
    std::optional<ScriptCall> history;
    if (options_.history_length > 0 && !recorded)
      history = history_entry(options_.key, record, options_.history_length, options_.retention);
    if (command_ended(end.end))
      hold_->lock().give_back(options_.min_hold, &history, left());
    else if (end.end == RunEnd::lost)
      hold_->lock().release_lost(&history, left());
    else
      hold_->lock().release(&history, left());
    // No release carried it: --min-hold, a lock lost, Redlock, or Redis away.
    if (history && !send_history(redis_, options_.key, *history, std::max(left(), k_quick_attempt)))
      report_.recorded = false;
    return record.exit_status;
  }

private:
  // START, the attempt's start entry: its end replaces it, or the release if it never ran.
  std::optional<int> started(const std::string& start) {
    got_.start = start;
    if (!start.empty())
      hold_->lock().forget_start(
          history_forget(options_.key, entry_token(lock_->token(), attempt_), start));
    return std::nullopt;
  }

  // The run's record, or under --retry its attempt's, ended as END: the command's cost is the
  // attempt's, unknown when the run ended before its next attempt began.
  RunRecord record_of(const AttemptEnd& end) {
    RunRecord record;
    record.holder = holder_;
    record.start = got_.start;
    record.token = lock_->token();
    record.fence = got_.fence;
    record.waited_ms = got_.waited.count();
    TimePoint now = Clock::now();
    record.held_ms = std::chrono::duration_cast<Millis>(now - got_.sent).count();
    if (options_.retry > 0) record.attempt = attempt_;
    TimePoint from = attempt_ > 1 ? attempt_from_ : got_.sent;  // the first: the lock's taking
    if (end.between_attempts && !command_ended(end.end)) {
      ++record.attempt;  // the one that was to come
      from = now;        // it never began
    } else {
      Child::Usage used = hold_->child().usage();
      record.cpu_user_ms = used.user.count();
      record.cpu_sys_ms = used.sys.count();
      record.max_rss_kb = used.max_rss_kb;
    }
    if (options_.retry > 0) set_attempt_span(record, got_.sent, from, now);
    record.end = run_end_name(end.end);
    record.exit_status = run_end_exit_status(end.end, end.status, end.status);
    if (end.stop) {
      record.by = end.stop->by;
      record.reason = end.stop->reason;
    }
    return record;
  }

  // --retry: after the attempt that ended as END (its end recorded now), the delay before the
  // next; nothing when it is the last (none left, not worth another, a stop, LOST) or its end could
  // not be recorded (the run's end records it).
  std::optional<Millis> again(const AttemptEnd& end, bool lost) {
    if (options_.retry == 0 || attempt_ > options_.retry || !command_ended(end.end) ||
        end.asked_to_stop || lost || !worth_another_attempt(options_, end.status))
      return std::nullopt;
    RunRecord record = record_of(end);
    if (!record_history(side_lock().redis(), options_, record)) return std::nullopt;
    metrics_.add_cost(record);
    Millis delay = retry_delay(options_, attempt_);
    log(Level::warning, {"retrying",
                         options_.key,
                         "attempt " + std::to_string(attempt_) + " of " +
                             std::to_string(options_.retry + 1) + ": " + result_text(record) +
                             "; running the command again in " + format_duration(delay),
                         {{"attempt", attempt_}, {"delay_ms", delay.count()}}});
    got_.start.clear();
    return delay;
  }

  // The lock on a connection of the main thread's, for while the renewal thread has the lock's.
  Lock& side_lock() {
    if (!side_lock_) {
      side_redis_ = connect_();
      side_lock_ = make_lock(*side_redis_, options_.key, lock_->token(), lock_mode(options_));
    }
    return *side_lock_;
  }

  // Before the release, the lease renewed, so that the next holder finds the period's run ended:
  // on the side connection, or, when it cannot be made, on the lock's with renewals stopped.
  void finish_period(RunRecord& record, TimePoint give_up) {
    record.period = period_->slot_name();
    Redis* on = &redis_;
    if (hold_->renewing()) try {
        on = &side_lock().redis();
      } catch (const Error&) {
        hold_->stop_renewals();
      }
    if (auto done = period_->record_end(*on, record, give_up); !done)
      log_warning(options_.key + ": could not record the end of this period's run (" +
                  done.failure().message + "); --retry-failed would take it for lost");
  }

  // --retry: the next attempt, on the last one's lease, its start in the history first. Null
  // when it could not start (said): the run ends as the last attempt did.
  Child* start_next() try {
    ++attempt_;
    for (std::string& var : hold_->spec.env)  // RLOCK_ATTEMPT, set by command_spec()
      if (var.starts_with("RLOCK_ATTEMPT=")) var = "RLOCK_ATTEMPT=" + std::to_string(attempt_);
    if (options_.history_length > 0) {  // its start, written on a main-thread connection
      auto id = eval(side_lock().redis(),
                     attempt_start(options_.key, holder_, got_.fence, attempt_,
                                   options_.history_length, options_.retention),
                     Clock::now() + command_timeout_);
      if (!id) warn_history(options_.key, id.failure().message);
      started(id && id->is_string() ? id->str : "");
    }
    if (heartbeat_)
      if (auto problem = heartbeat_->start(Clock::now()))
        log_warning("--heartbeat-file: " + *problem);
    if (output_) {
      // Its start entry's ID is the server's clock as it began.
      std::optional<int64_t> since;
      if (!got_.start.empty()) since = history_entry_ms(got_.start);
      output_->next_attempt(attempt_, since);
    }
    Child& next = hold_->start(signals_);
    attempt_from_ = Clock::now();
    return &next;
  } catch (const Error& e) {  // out of descriptors or processes: the job is not worse off
    log_warning(options_.key + ": cannot start attempt " + std::to_string(attempt_) + " (" +
                e.what() + "); the run ends as the last attempt did");
    --attempt_;
    return nullptr;
  }

  const RunOptions& options_;
  Redis& redis_;
  std::optional<Heartbeat> heartbeat_;
  SignalEvents& signals_;
  RunReport& report_;
  const StopListener::Connect connect_;
  std::unique_ptr<Lock> lock_;
  Holder holder_;  // since: from the lock's taking
  // The lock's, read once: its Redis is the renewal thread's while renewals run.
  const Millis command_timeout_;
  MetricsRecorder metrics_;
  Obtained got_{};
  std::optional<TimePoint> lease_from_;  // when the lease the command starts on began
  std::optional<PeriodGuard> period_;
  // Declared before hold_, so that on an early way out the command's group is killed before
  // its output's capture is abandoned.
  std::unique_ptr<OutputRelay> output_;
  std::optional<RunHold> hold_;  // from the lock's taking: it lets go before the metrics
  int attempt_ = 1;              // --retry: the attempt that runs, or ran last
  TimePoint attempt_from_{};     // --retry: when it started, from the second on (record_of)
  bool not_ours_ = false;        // --retry: Redis said the lock was not ours between attempts
  std::unique_ptr<Redis> side_redis_;
  std::unique_ptr<Lock> side_lock_;
  std::optional<StopListener> stops_;
};

}  // namespace

int run_verb(const GlobalOptions& global, const RunOptions& options) {
  if (options.shared && options.once_per)
    throw usage_error("--shared excludes --once-per: one run a period leaves no one to share the "
                      "lock with");
  std::vector<std::string> argv = command_argv(options);
  std::string program;
  if (auto refused = refuse_unrunnable(options, argv, &program)) {
    // Kept from running, as by a Redis that failed us: --notify-on always tells it; no Redis asked.
    SignalEvents signals;
    notify(options, nullptr,
           {std::nullopt, *refused, Millis(0), 0, current_holder(command_name(options)).host, 0},
           signals);
    return *refused;
  }
  std::optional<Heartbeat> heartbeat;
  if (options.heartbeat_file) {
    // A file that cannot be made is a mistake to report before the lock is taken.
    heartbeat.emplace(absolute_path(*options.heartbeat_file), *options.stale_after);
    if (auto problem = heartbeat->check()) throw usage_error("--heartbeat-file: " + *problem);
  }

  try {
    auto redis = connect_redis(global);
    check_topology(*redis, options);
    if (options.keep_output > 0 && redis->node_count() > 1)
      throw usage_error("--keep-output needs one Redis: Redlock's servers have no one place to "
                        "keep the output in");
    if (inherited_token(*redis, options)) return exec_straight_through(argv);

    SignalEvents signals;
    RunReport report;
    int status = [&] {
      // rlock stop's listener and the output's sender connect on their own threads, with
      // settings of their own: the threads may outlive this frame (StopListener, OutputSender).
      Run run(options, *redis, std::move(heartbeat), signals, report,
              [global] { return connect_redis(global, true); });
      if (auto status = run.take()) return *status;
      if (auto status = run.claim_period()) return *status;
      if (auto status = run.start_command(argv, program)) return *status;
      return run.finish(run.supervise());
    }();
    // The run is over: the lock given back (or kept for --min-hold), its metrics written.
    report.exit_status = status;
    notify(options, redis.get(), report, signals);
    return status;
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

constexpr const char* k_featured[] = {
    "--wait", "--conflict-exit-code", "--once-per", "--retry-failed", "--max-run", "--quiet"};

}  // namespace

constexpr Command k_run_command = {
    "run",
    "hold KEY while COMMAND runs",
    "KEY -- COMMAND [ARG...]\nKEY -c 'SHELL TEXT'",
    {OptionGroup{"Arguments", k_options}, k_waiting, k_process, k_records, k_retries, k_output,
     k_connection},
    "COMMAND is exec'd as given, without a shell; -c TEXT is run by $SHELL -c (or /bin/sh). "
    "It gets RLOCK_KEY, RLOCK_TOKEN, RLOCK_FENCE and RLOCK_TTL_MS (and RLOCK_HEARTBEAT_FILE, "
    "RLOCK_ATTEMPT); --notify's command gets RLOCK_RESULT and more (rlock-run(1)). "
    "A duration is 500ms, 30s, 5m, 1h30m, 2d or .5 (a bare number is seconds).\n"
    "Examples:\n"
    "  rlock run --once-per day -w 10m -q lock:report -- /opt/report/run.sh\n"
    "  rlock run -w 30s -E 0 lock:deploy -c 'make deploy'\n"
    "  rlock run --max-run 1h --retry 2 --notify /usr/bin/tell lock:sync -- /opt/sync\n"
    "Exit status: the command's own; 64 usage, 69 Redis unavailable, 75 busy (-E changes it), "
    "76 lock lost, 78 configuration, 79 hung (--heartbeat-file), 80 stopped (rlock stop), 124 "
    "--max-run, 125 rlock failed, 126 not executable, 127 not found.",
    make_arguments<RunArgs>,
    /*takes_command=*/true,
    /*reads_settings=*/true,
    k_featured};

}  // namespace rlock
