// rlock release KEY --token T | --force: give a lock back, or break anyone's and say whose.
#include "lock/history.h"
#include "lock/lock.h"
#include "lock/lock_value.h"
#include "print/print.h"
#include "process/keeper_link.h"
#include "util/log.h"
#include "verbs/command.h"
#include "verbs/verbs.h"

namespace rlock {

namespace {

struct ReleaseOptions {
  std::optional<std::string> token;
  bool force = false;  // break it whoever holds it (only TOKEN's, when given)
  bool now = false;    // with FORCE: delete, not a tombstone
  bool all = false;    // with FORCE: every place of a semaphore
  std::string reason;  // with FORCE: why, in the tombstone and the history
};

// How long a keeper has to say it stopped renewing: it answers at once unless it is stuck.
constexpr Millis k_tell_keeper_timeout{1000};

int give_back(Redis& redis, const std::string& key, const std::string& token) {
  check_token(token);
  // A keeper of acquire --while-pid on this host stops renewing first, so that it does not
  // take this release for a loss and signal its script.
  (void)tell_keeper(token, key, k_tell_keeper_timeout);
  // A plain lock, a semaphore slot (--limit) or a shared place (--shared): try each in turn.
  Result<bool> released = false;
  for (LockMode mode : {LockMode{}, k_any_semaphore, k_shared_place}) {
    auto lock = make_lock(redis, key, token, mode);
    released = lock->release(Clock::now() + redis.command_timeout());
    if (!released) return unavailable(released.failure());
    if (*released) break;
  }
  if (!*released) {
    log_error(key + ": not ours (the lock expired, was broken, or another token holds it)");
    return k_exit_not_held;
  }
  log_debug(key + ": released");
  return k_exit_ok;
}

// What became of one lock, or place of a semaphore or a shared lock (SHARED); its exit status.
int report(const std::string& key, const Broken& b, bool shared) {
  std::string shown = printable_key(key);
  // A place's token is a member of a sorted set, which any client may have written.
  std::string what = b.token.empty() ? shown
                     : shared        ? shown + " shared place " + printable(b.token)
                                     : shown + " place " + printable(b.token);
  // A broken shared place keeps out only a holder that wants the lock alone.
  std::string nobody = shared ? "Nobody can take the lock alone " : "Nobody can take it ";
  auto value = decode_lock_value(b.value);
  std::string whose = describe_holder(b.value, b.pttl);
  switch (b.what) {
  case Broken::What::broken:
    write_stdout(what + ": broken; it was held by " + whose + ". " + nobody +
                 (value ? "until that holder has stopped: when its rlock notices, at its next "
                          "renewal, or in " +
                              format_duration(b.pttl) + " at the latest\n"
                        : "before it would have expired, in " + format_duration(b.pttl) + "\n"));
    return k_exit_ok;
  case Broken::What::deleted:
    if (value && value->broken) {
      write_stdout(what + ": free now (--now): removed the tombstone " +
                   printable(value->broken->by) + " left when breaking it\n");
      return k_exit_ok;
    }
    write_stdout(what + ": released by force (--now); it was held by " + whose + "\n");
    log_warning(what + ": if that holder still runs, it overlaps the next one until its rlock "
                       "notices, at its next renewal");
    return k_exit_ok;
  case Broken::What::already:
    write_stdout(what + ": already broken: " +
                 (value && value->broken ? broken_text(*value, b.pttl) : whose) +
                 "; nothing changed\n");
    return k_exit_ok;
  case Broken::What::other:
    log_error(b.value.empty()
                  ? what + ": no place is held by that token; nothing changed"
                  : what + ": held by " + whose + ", not by that token; nothing changed");
    return k_exit_not_held;
  case Broken::What::no_expiry:
    log_error(what + ": held by " + whose +
              ": no lease bounds its holder, so nothing tells when it has stopped; nothing "
              "changed (if it is surely gone: --force --now)");
    return k_exit_not_held;
  }
  return k_exit_internal;
}

// Records in KEY's history who broke the holder B (by its fence), when and why.
void record_break(Redis& redis, const std::string& key, const Broken& b,
                  const ReleaseOptions& options, const RunOptions& run) {
  if (b.what != Broken::What::broken && b.what != Broken::What::deleted) return;
  RunRecord entry = action_entry(RunEnd::forced_release, options.reason);
  if (auto value = decode_lock_value(b.value)) entry.fence = value->fence.value_or(0);
  record_action(redis, key, entry, run.history_length, run.retention);
}

int break_by_force(Redis& redis, const std::string& key, const ReleaseOptions& options,
                   const RunOptions& run) {
  auto outcome = break_lock(redis, key,
                            {options.token.value_or(""), options.all, options.now, options.reason});
  if (!outcome) return unavailable(outcome.failure());
  if (outcome->type == "none") {
    write_stdout(printable_key(key) + ": was free; nothing to release\n");
    return k_exit_not_held;
  }
  if (outcome->type != "string" && outcome->type != "zset") {
    log_error(key + ": not a lock: the key holds a " + outcome->type + "; left alone");
    return k_exit_unavailable;
  }
  if (outcome->broken.empty())
    throw usage_error(key + " is " +
                      (outcome->shared ? "shared by " + std::to_string(outcome->places) +
                                             (outcome->places == 1 ? " holder" : " holders")
                                       : "a semaphore with " + std::to_string(outcome->places) +
                                             " places taken") +
                      ": break one with --force --token T (rlock inspect " + key +
                      " shows the tokens), or every one with --force --all; nothing changed");
  int status = k_exit_not_held;
  for (const Broken& b : outcome->broken) {
    status = std::min(status, report(key, b, outcome->shared));
    record_break(redis, key, b, options, run);
  }
  return status;
}

}  // namespace

int release_verb(const GlobalOptions& global, const RunOptions& run, const std::string& key,
                 const ReleaseOptions& options) {
  if (!options.force && (options.now || options.all || !options.reason.empty()))
    throw usage_error(std::string(options.now   ? "--now"
                                  : options.all ? "--all"
                                                : "--reason") +
                      " goes with --force");
  if (!options.force && !options.token) throw usage_error("give --token T, or --force");
  if (options.all && options.token) throw usage_error("give --token T or --all, not both");
  if (options.token) check_token(*options.token);
  auto redis = connect_redis(global);
  if (options.force) return break_by_force(*redis, key, options, run);
  return give_back(*redis, key, *options.token);
}

namespace {

struct ReleaseArgs : Arguments {
  std::string key;
  std::optional<std::string> token;
  bool force = false;
  bool now = false;
  bool all = false;
  std::optional<std::string> reason;

  int run(const Invocation& in) override {
    return release_verb(in.resolved.global, in.resolved.run, in.key(key),
                        {token, force, now, all, reason_argument(reason)});
  }
};

constexpr Option k_options[] = {
    option<&ReleaseArgs::key>("KEY", k_key_help).must(),
    option<&ReleaseArgs::token>("--token", "the token acquire printed", "TOKEN"),
    option<&ReleaseArgs::force>("--force",
                                "break the lock whoever holds it (with --token: only that "
                                "holder's); it stays taken until the holder has surely stopped"),
    option<&ReleaseArgs::now>("--now",
                              "with --force: free it at once (the holder is known to be dead)"),
    option<&ReleaseArgs::all>("--all",
                              "with --force: every place of a semaphore (--limit) or shared lock "
                              "(--shared)"),
    option<&ReleaseArgs::reason>("--reason",
                                 "with --force: why, shown with the tombstone and recorded in "
                                 "the history",
                                 "TEXT")};

}  // namespace

constexpr Command k_release_command = {
    "release",
    "give a lock back, or break anyone's",
    "KEY --token T\nKEY --force [--token T | --all] [--now]",
    {k_options, k_output, k_connection},
    "--force leaves a tombstone: nobody takes the lock until its holder has surely\n"
    "stopped (its rlock notices at its next renewal and stops the command; cut off\n"
    "from Redis, at its lease's end). --now frees it at once: an overlap if it runs.\n"
    "Examples:\n"
    "  rlock release lock:migrate --token \"$t\"\n"
    "  rlock release lock:daily-report --force --reason 'host is gone'\n"
    "Exit status: 0 released or broken, 1 not ours or free (nothing changed), 69 Redis "
    "unreachable or not a lock; 64 usage, 78 configuration, 125 rlock failed.",
    make_arguments<ReleaseArgs>};

}  // namespace rlock
