// The lock protocol: the operations on one lock key: acquire (with the waiting queue), renew,
// release, leave the queue, for each kind of lock (a mutex, a semaphore, a shared lock, a
// Redlock; see Lock).
// The Lua scripts they run are in src/lua (scripts.h). It speaks to "a Redis" (redis.h) and
// knows nothing of processes or the command line.
//
// Keys of lock KEY (all in KEY's Cluster hash slot, see helper_key):
//   KEY                     the lock: a string, the holder's value, with PX ttl
//   {KEY}:rlock:fence       counter of acquisitions: the fencing numbers
//   {KEY}:rlock:queue       waiters, by arrival (zset token -> server time in us)
//   {KEY}:rlock:alive       waiters' liveness (zset token -> expiry in ms); the dead are pruned
//   {KEY}:rlock:wake-TOKEN  one waiter's wake-up list, which it BLPOPs
//   {KEY}:rlock:sem         semaphore holders (zset token -> expiry in ms), for --limit
//   {KEY}:rlock:holders     semaphore holders' values (hash token -> value)
//   {KEY}:rlock:shared      shared holders (zset token -> expiry in ms), for --shared; a lock
//                           is held alone (KEY) or shared, never both
//   {KEY}:rlock:shared-values   shared holders' values (hash token -> value)
//   {KEY}:rlock:shared-waiters  the waiters of the queue that want to share (zset token ->
//                           end of their place); every other waiter wants the lock alone
//   {KEY}:rlock:pause       a pause (rlock pause, pause.h): nobody takes the lock while it
//                           lives; it expires at the pause's end
//   rlock-output:{KEY}:rlock:outputs  the runs whose output is kept (--keep-output,
//                           kept_output.h), each with its stream
//                           rlock-output:{KEY}:rlock:output-FENCE (kept_output_key)
//   {KEY}:rlock:last-output  when each run that keeps its output last printed (zset fence ->
//                           the server's clock in ms; kept_output.h)
//   {KEY}:rlock:ended       the ends of runs applied (zset 'release TOKEN' or 'history TOKEN'
//                           -> expiry in ms, a minute on): an end sent again finds the first
//   {KEY}:rlock:phase       what each holder's run is doing when not simply running (hash
//                           token -> phase, run_phase.h): renewed with the lock, released
//                           with it
//   {KEY}:rlock:last-success  the newest success's history entry (a hash: id, then its
//                           fields), which check reads in one step (history.h)
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "lock/lock_value.h"
#include "redis/redis.h"
#include "util/clock.h"
#include "util/duration.h"
#include "util/error.h"

namespace rlock {

// The name of a helper key of KEY, chosen to live in KEY's Redis Cluster hash slot so one
// script may touch both, and never the name of another key's helper (docs/DESIGN.md "Keys"):
//   KEY without '}' ("lock:daily") -> "{lock:daily}:rlock:fence"  (the whole key is the tag)
//   KEY with '}'    ("job:{42}")   -> "job:{42}:rlock{}:fence"   (appending keeps its tag)
// A key with a '}' but no tag ("a}b") has none to keep; its helpers share a slot only outside
// Cluster.
std::string helper_key(std::string_view key, std::string_view kind);
inline constexpr std::string_view k_helper_separator = ":rlock:";
inline constexpr std::string_view k_braced_separator = ":rlock{}:";

// The name of a key that holds KEY's kept output (--keep-output; KIND "outputs" or
// "output-FENCE"): a helper key under a prefix of its own, so that an ACL may give the lock's
// other keys (status, history) without the job's output, which is the job's to show
// (docs/REDIS.md "Least privilege").
std::string kept_output_key(std::string_view key, std::string_view kind);
inline constexpr std::string_view k_kept_output_prefix = "rlock-output:";

// Whether KEY is one of rlock's helper keys (fence counter, queue ...), which are never locks.
bool is_helper_key(std::string_view key);

// How a waiter waits. Rlock holders wake the first waiter when they release; a holder that
// died is noticed at its expiry; other software's locks send no wake-up, so they are looked at
// again every FALLBACK.
struct WaitPlan {
  Millis max_block;  // never block longer than this before looking again
  Millis fallback;   // how often to look at a lock that will not wake us
};
inline constexpr Millis k_wake_fallback{2000};

struct Acquired {
  int64_t fence;
  int64_t taken_ms = 0;  // the server's clock when the lock was taken (the value's since)
  std::string start;     // the ID of the run's start entry in the history (StartRecord), or ""
};

// The start of a run (rlock run) in the key's history (history.h), written by the acquire
// script in the step that takes the lock, so that a run whose rlock dies is recorded all the
// same; its end replaces it. MAX_LENGTH and RETENTION are the history's; FIELDS the entry's
// (host, pid ...), to which the script adds since, fence and end=running, and the lock
// waited_ms (counted from WAIT_BEGAN).
struct StartRecord {
  int max_length = 0;
  Millis retention{0};
  Argv fields;
  TimePoint wait_began{};
};
struct Busy {
  std::string value;  // the holder's raw value; empty when the lock is free but not our turn
  Millis pttl;        // time to its expiry; negative when there is no expiry (or no holder)
  Millis block;       // how long to wait for a wake-up before trying again (0: not waiting)
  // Shared holders that keep us out (--shared; VALUE is one of theirs); 0: none, or the lock
  // is held alone.
  int64_t sharers = 0;
  // The key is paused (rlock pause): VALUE is the pause's text (pause.h), PTTL its time left.
  bool paused = false;
};
struct WrongType {
  std::string type;  // the key holds a hash, a list ...: not a lock
};
using AcquireOutcome = std::variant<Acquired, Busy, WrongType>;

struct LockMode {
  int limit = 0;         // 0: a mutex; N > 0: a semaphore with N holders (--limit)
  bool fair = false;     // waiters served in arrival order (--fair)
  int min_replicas = 0;  // acquisitions and renewals count once N replicas have them (WAIT)
  Millis retention{0};   // the fence counter is kept this long after an acquisition; 0: for ever
  bool shared = false;   // a shared holder (--shared) among others, not the holder alone
};

// How long WAIT may wait for --min-replicas acknowledgements: a tenth of the ttl, within
// 10 ms .. 1 s, so that it fits in a renewal attempt.
constexpr Millis replica_wait(Millis ttl) {
  return std::min(std::max(ttl / 10, Millis(10)), Millis(1000));
}

// What `release --force` is to break.
struct BreakRequest {
  std::string token;   // only the lock, or the semaphore place, this token holds ("": any)
  bool all = false;    // every place of a semaphore
  bool now = false;    // delete at once, rather than leave a tombstone until the holder stops
  std::string reason;  // why (--reason), in the tombstone and the broken run's history
};

// A lock, or a semaphore place, that `release --force` found.
struct Broken {
  enum class What {
    broken,     // a tombstone now stands in for it until its holder has surely stopped
    deleted,    // --now: gone, and a waiter woken
    already,    // a tombstone already: left as it is
    other,      // the token asked for does not hold it: left alone
    no_expiry,  // no expiry, so no lease bounds its holder: left alone (--now deletes it)
  };
  std::string token;  // a semaphore place's holder
  std::string value;  // the value it held
  Millis pttl{-2};    // what was left of it: a tombstone lasts that long at most
  What what = What::broken;
};

struct BreakOutcome {
  std::string type;  // "none": free; "string": a lock; "zset": a semaphore; else not a lock
  std::vector<Broken> broken;
  int places = 0;       // a semaphore given neither a token nor --all: how many places it has
  bool shared = false;  // the places are a shared lock's (--shared), not a semaphore's
};

// Breaks KEY (a lock, or the places of a semaphore or of a shared lock) whoever holds it, as
// REQUEST says; with Redlock, on every node (the node whose lock had the most time left is
// reported).
Result<BreakOutcome> break_lock(Redis& redis, const std::string& key, const BreakRequest& request);

// What a renewal says of the run's phase (run_phase.h): nothing, or its phase set (TEXT, from
// encode_run_phase(), which began AGO before the renewal is sent and waits until DUE_IN after),
// cleared (running again), or kept alive with the lock.
struct PhaseUpdate {
  enum class Op { none, keep, set, clear };
  Op op = Op::none;
  std::string text;
  Millis ago{0}, due_in{0};
};

// For renewing or releasing a semaphore slot by its token, where the limit does not matter.
inline constexpr LockMode k_any_semaphore{2, false};
// The same for a shared lock's place.
inline constexpr LockMode k_shared_place{.shared = true};

// One lock, held (or wanted) by one token: the operations every kind of lock has. The kind is
// chosen once, by make_lock(), from the Redis and the mode: a mutex (lock_mutex.cpp), a
// semaphore of --limit slots (lock_semaphore.cpp), a place of a shared lock (lock_shared.cpp),
// or a Redlock over several independent nodes (lock_quorum.cpp). A new kind is a new file and
// a line in make_lock().
class Lock {
public:
  virtual ~Lock() = default;
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

  const std::string& key() const { return key_; }
  const std::string& token() const { return token_; }
  const LockMode& mode() const { return mode_; }
  // Our wake-up list, to BLPOP while waiting.
  const std::string& wake_key() const { return wake_key_; }
  // The connection's per-command timeout, for callers without a tighter deadline.
  Millis command_timeout() const { return redis_.command_timeout(); }
  Redis& redis() { return redis_; }

  // Takes the lock if it is free (and, with --fair, it is our turn), drawing the next fencing
  // number in the same step; VALUE is encode_lock_value() of our holder without a fence. With
  // a WAIT plan, a busy answer also puts us in the queue. Retrying after a lost reply is safe:
  // a lock that is already ours counts as acquired.
  virtual Result<AcquireOutcome> try_acquire(const std::string& value, Millis ttl,
                                             const std::optional<WaitPlan>& wait,
                                             TimePoint deadline) = 0;
  // Sets the expiry of our lock to TTL from now; false when it is not ours (gone, or taken).
  // PHASE rides along, written only when the lock is ours.
  virtual Result<bool> renew(Millis ttl, TimePoint deadline, const PhaseUpdate& phase) = 0;
  // Gives our lock back and wakes the first waiter; false when it was not ours (no change).
  Result<bool> release(TimePoint deadline) { return release(deadline, {}, nullptr); }
  // A release may be sent again until it is answered: one that was applied already (its reply
  // lost with a closed connection) is found by our token, true again, and changes nothing.
  // release(), with THEN (scripts on this lock's helper keys, such as its history entry) in
  // the same round trip, after it; their replies land in THEN_REPLIES when the release was
  // answered. Redlock does not send THEN (THEN_REPLIES stays empty).
  virtual Result<bool> release(TimePoint deadline, const std::vector<ScriptCall>& then,
                               std::vector<Reply>* then_replies) = 0;
  // Leaves the queue after waiting in vain, passing on a wake-up we will not use.
  virtual Result<Unit> leave_queue(TimePoint deadline);
  // From now on, an acquisition records the run's start (StartRecord). Not under Redlock,
  // whose run has one entry, on the node that answers its end (docs/DESIGN.md).
  void record_start(StartRecord start) { start_ = std::move(start); }
  // Whether our token holds the lock now (without renewing it).
  virtual Result<bool> holds(TimePoint deadline) = 0;

protected:
  Lock(Redis& redis, std::string key, std::string token, LockMode mode);

  // --min-replicas: nothing when enough replicas have our last write (made on the node that
  // holds STATE_KEY), else why not.
  std::optional<Failure> replicated(const std::string& state_key, Millis ttl, TimePoint deadline);
  // The reply of an acquire script (src/lua/acquire.lua) as an outcome; an acquisition counts
  // once --min-replicas is met (else the lock is given back).
  Result<AcquireOutcome> acquire_outcome(Result<Reply> reply, const std::string& state_key,
                                         Millis ttl, TimePoint deadline);
  // The reply of a renew script: renewed once --min-replicas is met (a failover would lose
  // the longer ttl).
  Result<bool> renew_outcome(Result<Reply> reply, const std::string& state_key, Millis ttl,
                             TimePoint deadline);
  // The replies of a release script and THEN (eval_then): THEN's go to THEN_REPLIES.
  static Result<bool> release_outcome(Result<std::vector<Reply>> replies,
                                      std::vector<Reply>* then_replies);
  // A renew script's KEYS and ARGV, with the phase's key and PHASE's arguments last when it
  // says anything.
  void add_phase(Argv& keys, Argv& args, const PhaseUpdate& phase) const;
  // An acquire script's KEYS and ARGV, with the history's key and the start's arguments last
  // when a start is to be recorded.
  void add_start(Argv& keys, Argv& args) const;

  Redis& redis_;
  const std::string key_;
  const std::string token_;
  const LockMode mode_;
  const std::string owner_prefix_;  // owner_prefix(token_): what our lock's value starts with
  // An attempt that may have queued us was sent (one that waits, answered or not): the lock
  // taken later must leave our place in the queue.
  bool may_be_queued_ = false;
  const std::string fence_key_, queue_key_, alive_key_, wake_prefix_, wake_key_;
  const std::string ends_key_;  // the ends of runs applied, by token (common.lua)
  // A shared lock's places (--shared), which keep the holder alone out: acquire.lua looks.
  const std::string shared_key_, shared_values_key_;
  const std::string phase_key_;  // the holders' runs' phases (run_phase.h)
  const std::string pause_key_;  // rlock pause (pause.h): nobody takes the lock while it lives
  std::optional<StartRecord> start_;
};

// Who broke TOKEN's hold of KEY (release --force), as the tombstone in its place says: the
// lock's, a semaphore's or a shared lock's; nothing when no tombstone of TOKEN's is there.
Result<std::optional<Breaking>> broken_by(Redis& redis, const std::string& key,
                                          const std::string& token, TimePoint deadline);

// The lock KEY for TOKEN, of the kind REDIS and MODE call for (see Lock).
std::unique_ptr<Lock> make_lock(Redis& redis, std::string key, std::string token,
                                LockMode mode = {});

}  // namespace rlock
