// rlock stop KEY: ask whoever holds KEY, on any host, to stop its command, and wait until the
// lock is given back (stop_request.h).
#include <algorithm>
#include <csignal>

#include "lock/lock.h"
#include "lock/lock_value.h"
#include "lock/stop_request.h"
#include "print/print.h"
#include "process/signals.h"
#include "redis/retry.h"
#include "run/wait.h"
#include "util/log.h"
#include "verbs/command.h"
#include "verbs/verbs.h"

namespace rlock {

namespace {

// How long a holder has to answer: its rlock listens from half a second into the run and
// answers at once, so one that has not within this is away (its host down or cut off, its
// rlock frozen, or an rlock older than stop). The server refuses a later answer.
constexpr Millis k_answer_within{5000};
// How long the request is sent again, behind Sentinel or in a Cluster, while Redis cannot take
// it in a way that may pass: a failover (5 to 8 s on Sentinel's default servers).
constexpr Millis k_ask_within{10000};
// How much longer than that the asker waits for an answer the server took in time.
constexpr Millis k_answer_margin{1000};
// How long to wait for the lock to be given back once the request was taken, unless --within.
constexpr Millis k_default_within{60000};
// How often to look whether the lock was given back.
constexpr Millis k_look_every{50};
// While waiting for an answer, how often to look whether the holder gave the lock back without
// one: a run that ends as it is asked (its listener gone first) never answers, and its asker
// must not wait out k_answer_within to call it away.
constexpr Millis k_answer_slice{250};

struct StopOptions {
  std::string token;  // "": every holder
  std::string reason;
  int signal = 0;  // 0: each holder's own --kill-signal
  std::optional<Millis> kill_after;
  Millis within = k_default_within;
};

// One holder asked, and how far it has come.
struct Asked {
  StopAsked holder;
  std::string who;  // the holder as it was when asked (describe_holder)
  std::optional<Millis> taken_after, released_after;
  // The request the holder had taken before ours: it was stopping already, at another's word.
  std::optional<StopRequest> before;
};

LockMode mode_of(const std::string& kind) {
  if (kind == "semaphore") return k_any_semaphore;
  if (kind == "shared") return k_shared_place;
  return {};
}

// How a wait of rlock stop ended early: a failure to look, or a signal (its exit status).
struct Cut {
  std::optional<Failure> failure;
  int status = 0;
};

// Whether the holder of A still holds KEY.
Result<bool> still_holds(Redis& redis, const std::string& key, const std::string& kind,
                         const Asked& a) {
  return make_lock(redis, key, a.holder.token, mode_of(kind))
      ->holds(Clock::now() + redis.command_timeout());
}

Millis since(TimePoint began) { return std::chrono::duration_cast<Millis>(Clock::now() - began); }

// Waits for the holders' answers to asker ID, from BEGAN (the server refuses them once
// k_answer_within has passed). One that gives the lock back meanwhile without answering was
// ending: nothing more to wait for. A signal takes back the requests not taken yet: none is
// acted on after its asker gave up.
std::optional<Cut> hear_answers(Redis& redis, const std::string& key, const std::string& id,
                                const std::string& kind, std::vector<Asked>& asked, TimePoint began,
                                SignalEvents& signals) {
  TimePoint answers_by = began + k_answer_within + k_answer_margin;
  std::vector<std::string> unanswered;
  for (const Asked& a : asked) unanswered.push_back(a.holder.token);
  while (!unanswered.empty() && Clock::now() < answers_by) {
    auto answered =
        await_stop_answers(redis, key, id, unanswered,
                           std::min(Clock::now() + k_answer_slice, answers_by), signals.fd());
    if (!answered && answered.failure().kind == Failure::Kind::interrupted) {
      (void)withdraw_stop_requests(redis, key, id, unanswered,
                                   Clock::now() + redis.command_timeout());
      return Cut{std::nullopt,
                 exit_status_for_signal(signals.next_request_to_stop().value_or(SIGINT))};
    }
    if (!answered) return Cut{answered.failure()};
    for (const StopAnswer& answer : *answered)
      for (Asked& a : asked)
        if (a.holder.token == answer.token) {
          a.taken_after = std::chrono::duration_cast<Millis>(answer.at - began);
          a.before = answer.before;
        }
    for (Asked& a : asked) {
      if (std::find(unanswered.begin(), unanswered.end(), a.holder.token) == unanswered.end())
        continue;
      if (!a.taken_after) {
        auto held = still_holds(redis, key, kind, a);
        if (!held) return Cut{held.failure()};
        if (*held) continue;
        // Given back: its answer, given just before it stopped, is looked for once more.
        if (!a.released_after) {
          a.released_after = since(began);
          continue;
        }
      }
      std::erase(unanswered, a.holder.token);
    }
  }
  return std::nullopt;
}

// Waits until the holders that answered gave the lock back, within WITHIN of their answer.
std::optional<Cut> await_given_back(Redis& redis, const std::string& key, const std::string& kind,
                                    std::vector<Asked>& asked, TimePoint began, Millis within,
                                    SignalEvents& signals) {
  for (;;) {
    bool waiting = false;
    for (Asked& a : asked) {
      if (!a.taken_after || a.released_after) continue;
      auto held = still_holds(redis, key, kind, a);
      if (!held) return Cut{held.failure()};
      Millis now = since(began);
      if (!*held)
        a.released_after = now;
      else
        waiting = waiting || now < *a.taken_after + within;
    }
    if (!waiting) return std::nullopt;
    // Taken, so acted on: a signal now ends only our wait.
    if (auto sig = sleep_interruptible(Clock::now() + k_look_every, signals))
      return Cut{std::nullopt, exit_status_for_signal(*sig)};
  }
}

// What became of one holder asked; its exit status.
int report(const std::string& key, const Asked& a) {
  if (!a.taken_after && a.released_after) {
    // Its run was ending: what it was asked to stop is over all the same.
    write_stdout(printable_key(key) + ": " + a.who + " gave the lock back after " +
                 format_duration(*a.released_after) + ", before it took the request\n");
    return k_exit_ok;
  }
  if (!a.taken_after) {
    log_error(key + ": " + a.who + " did not answer within " + format_duration(k_answer_within) +
              ": its rlock is away (its host down or cut off, rlock frozen) or does not listen (a "
              "lock of rlock acquire without --while-pid, a run kept for --min-hold, an rlock "
              "older than stop); the request was withdrawn. rlock release --force " +
              key + " breaks the lock, which stays taken until that holder's lease ends");
    return k_exit_busy;
  }
  if (!a.released_after) {
    log_error(key + ": " + a.who + " answered after " + format_duration(*a.taken_after) +
              " but still holds the lock (its command or what it left running does not end?)");
    return k_exit_busy;
  }
  if (a.before) {
    write_stdout(printable_key(key) + ": " + a.who +
                 " was already stopping; the lock was given back after " +
                 format_duration(*a.released_after) + "; stopped by " +
                 printable(stopped_by_text(a.before->by, a.before->reason), 200) + "\n");
    return k_exit_ok;
  }
  write_stdout(printable_key(key) + ": stopped " + a.who + "; the lock was given back after " +
               format_duration(*a.released_after) + "\n");
  return k_exit_ok;
}

}  // namespace

int stop_verb(const GlobalOptions& global, const std::string& key, const StopOptions& options) {
  if (!options.token.empty()) check_token(options.token);
  SignalEvents signals;  // Ctrl-C takes back what was asked (hear_answers)
  auto redis = connect_redis(global);
  // The holders answer this asker on lists of its own, named by a fresh id.
  StopRequest request{.by = operator_name(),
                      .at = "-",
                      .reason = options.reason,
                      .signal = options.signal,
                      .kill_after = options.kill_after,
                      .id = make_token()};
  auto ask = [&] {
    return ask_to_stop(*redis, key, options.token, request, k_answer_within,
                       Clock::now() + redis->command_timeout());
  };
  auto asked = ask();
  // Through a failover (the sentinels agree on no primary for seconds), asked again; one
  // server that refuses connections is unreachable at once. Asked after the first try, which
  // teaches a Cluster client its slot map.
  if (!asked && redis->can_fail_over()) {
    Resend tries(Clock::now() + k_ask_within);
    while (!asked && tries.again(asked.failure())) asked = ask();
  }
  if (!asked) return unavailable(asked.failure());
  if (asked->kind == "foreign") {
    log_error(key + ": not an rlock lock: " +
              (asked->foreign_type == "string"
                   ? "another program's (value \"" + printable(asked->value, 40) + "\")"
                   : "the key holds a " + asked->foreign_type) +
              "; nothing asked");
    return k_exit_unavailable;
  }
  if (asked->kind == "broken") {
    write_stdout(printable_key(key) +
                 ": already broken (release --force); its holder is stopping: " +
                 describe_holder(asked->value, asked->broken_pttl) + "\n");
    return k_exit_not_held;
  }
  if (asked->asked.empty()) {
    if (asked->kind == "none" || options.token.empty())
      write_stdout(printable_key(key) + ": free; nothing to stop\n");
    else
      log_error(key + ": no holder with that token; nothing asked");
    return k_exit_not_held;
  }
  std::vector<Asked> all;
  for (const StopAsked& a : asked->asked)
    all.push_back({a, describe_holder(a.value, a.pttl), std::nullopt, std::nullopt, std::nullopt});
  TimePoint began = Clock::now();
  auto cut = hear_answers(*redis, key, request.id, asked->kind, all, began, signals);
  if (!cut) cut = await_given_back(*redis, key, asked->kind, all, began, options.within, signals);
  if (cut) {
    if (cut->failure) return unavailable(*cut->failure);
    return cut->status;
  }
  int status = k_exit_ok;
  for (const Asked& a : all) status = std::max(status, report(key, a));
  return status;
}

namespace {

struct StopArgs : Arguments {
  std::string key;
  std::optional<std::string> token, reason, signal, kill_after, within;

  int run(const Invocation& in) override {
    StopOptions o;
    o.token = token.value_or("");
    o.reason = reason_argument(reason);
    if (signal) {
      auto sig = parse_signal(*signal);
      if (!sig)
        throw usage_error("--signal: '" + *signal + "' is not a signal (TERM, INT, 15 ...)");
      o.signal = *sig;
    }
    if (kill_after) o.kill_after = positive_duration("--kill-after", *kill_after);
    if (within) o.within = positive_duration("--within", *within);
    return stop_verb(in.resolved.global, in.key(key), o);
  }
};

constexpr Option k_options[] = {
    option<&StopArgs::key>("KEY", k_key_help).must(),
    option<&StopArgs::reason>("--reason", "why, for the history and watch", "TEXT"),
    option<&StopArgs::token>("--token",
                             "only the holder with this token (a semaphore or shared lock: "
                             "default every holder)",
                             "TOKEN"),
    option<&StopArgs::signal>(
        "--signal", "send SIG, not the holder's --kill-signal (run's name for the same)", "SIG"),
    option<&StopArgs::kill_after>("--kill-after",
                                  "KILL after D (default: the holder's --kill-after)", "D"),
    option<&StopArgs::within>("--within",
                              "how long to wait for the lock to be given back (default 1m)", "D")};

}  // namespace

constexpr Command k_stop_command = {
    "stop",
    "stop the command that holds KEY, on any host",
    "KEY [--reason TEXT] [--signal SIG] [--within D]",
    {k_options, k_output, k_connection},
    "The holder sends the signal to its command's process group within a second, KILL after\n"
    "the kill-after, gives the lock back, records the run as stopped by you, and exits 80.\n"
    "If another's stop came first, you are told whose.\n"
    "A stopped --once-per run counts as its period's run (unless the job has --retry-failed):\n"
    "rlock reset-period KEY --once-per PERIOD lets the next one run.\n"
    "Examples:\n"
    "  rlock stop lock:daily-report --reason 'bad input file'\n"
    "  rlock stop lock:sync --signal INT --within 30s\n"
    "Exit status: 0 given back (stopped at your or another's request), 1 nothing held (or not "
    "by --token), 69 Redis unreachable or not a lock, 75 the holder did not answer within 5s "
    "or still holds it; 64 usage, 78 configuration, 125 rlock failed.",
    make_arguments<StopArgs>};

}  // namespace rlock
