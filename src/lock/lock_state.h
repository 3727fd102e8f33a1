// A lock seen from outside, as operators look at it (status, inspect, list) and break it
// (release --force). Reads are plain pipelined commands, not scripts or MULTI, so that they also
// work on a read-only replica and on a server out of memory: the times an operator needs them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lock/history.h"
#include "lock/lock_value.h"
#include "lock/run_phase.h"
#include "redis/redis.h"
#include "util/duration.h"
#include "util/error.h"

namespace rlock {

// The most waiters, and places of a semaphore or a shared lock, read of one lock: their sorted
// sets are data another Redis user could have made huge, and a reply's elements take many
// times their bytes in memory (docs/DESIGN.md, "Reads with a bound"). rlock's own are as many
// as the hosts that run the job.
inline constexpr int64_t k_places_read_most = 1000;

// One holder of a semaphore (--limit), or of a shared lock (--shared).
struct SemaphoreHolder {
  std::string token;
  std::string raw;
  std::optional<LockValue> value;
  Millis ttl{0};
  std::optional<StoredPhase> phase;  // its run's, when not simply running
};

// One rlock process waiting for a lock, in arrival order.
struct QueuedWaiter {
  std::string token;
  Millis waiting{0};    // since it arrived
  Millis place{0};      // how long its place lasts unless it renews it; <= 0: it died, or is late
  bool shares = false;  // it wants to share the lock (--shared), else to hold it alone
};

// Redlock: what its nodes said of one lock. read_locks() asks every node at once and shows
// what a quorum of them says; any other topology is one node, which agrees with itself.
struct NodeVotes {
  size_t nodes = 1;     // Redlock's nodes
  size_t answered = 1;  // those that replied within one command timeout
  size_t agree = 1;     // those that say what the state shows (free: free)
  // Whether the state is known: not when a value is held on so few nodes that, with the nodes
  // that did not answer, a quorum may hold it (then the state is free, with that minority).
  bool known = true;
  std::vector<std::string> unanswered;  // the others, by name
  std::vector<std::string> failures;    // why each of them gave no answer, for a warning
};

// Redlock: a value that fewer nodes than a quorum hold. The lock is free (a run can take it),
// yet the run that wrote the value may still be running until its next renewal fails.
struct Minority {
  std::string raw;
  Millis pttl{-2};   // the longest any of its nodes keeps it
  size_t nodes = 0;  // how many hold it
};

struct LockState {
  enum class Kind {
    free,
    held,        // by rlock: value decodes
    broken,      // a tombstone (release --force) until the broken holder has surely stopped
    foreign,     // a plain string another client set (SET NX PX token)
    semaphore,   // held by up to --limit rlock holders
    shared,      // held by any number of --shared rlock holders
    not_a_lock,  // a hash, a list ...
  };
  std::string key;
  Kind kind = Kind::free;
  std::string type;                      // Redis type, for not_a_lock
  std::string raw;                       // the value as stored
  std::optional<LockValue> value;        // decoded, when rlock wrote it
  std::optional<StoredPhase> phase;      // held: its run's, when not simply running
  Millis pttl{-2};                       // -1: no expiry; -2: no key
  std::optional<int64_t> fence_counter;  // the last fence drawn for this key
  // How long the fence counter and the history are kept (--retention): -1 for ever, -2 absent.
  Millis fence_counter_pttl{-2};
  Millis history_pttl{-2};
  int64_t waiters = 0;              // rlock processes waiting for it, alive
  std::vector<QueuedWaiter> queue;  // every waiter in arrival order, dead ones too
  std::vector<SemaphoreHolder> semaphore;
  std::vector<SemaphoreHolder> shared;  // --shared holders, by expiry
  std::optional<RunRecord> last_run;    // the newest run of the key's history, not running
  std::string newest_entry;  // the ID of the history's newest entry of any kind, or empty
  std::string pause;         // rlock pause's text (pause.h), or empty: not paused
  Millis pause_pttl{-2};     // the pause's time left
  int64_t now_ms = 0;        // the server's clock when it was read
  // When the runs that keep their output (--keep-output) last printed: fence -> the server's
  // clock in ms as Redis took the bytes (kept_output.h, {KEY}:rlock:last-output).
  std::map<int64_t, int64_t> last_output;
  // Waiters and places past k_places_read_most, not read: WAITERS, QUEUE and the places are of
  // those read.
  int64_t not_shown = 0;
  // The helper keys that hold another type than rlock keeps there, each named in a message
  // for the verbs to say (Pipeline::wrong_type).
  std::vector<std::string> wrong_types;
  NodeVotes votes;
  std::optional<Minority> minority;  // free by quorum, yet held on some nodes
};

// The fences of S's holders now (the lock's, or its places'), a tombstone's too (its broken
// holder is still stopping): a run's start entry whose fence is among them is running
// (settle_starts in history.h).
std::vector<int64_t> held_fences(const LockState& s);

// What read_locks() makes of a Redlock lock whose state is not known (NodeVotes::known): a
// failure, for the verbs that act on the state (check, watch, logs), or a state to show
// (status, inspect, list).
enum class Unknown { fails, shown };

// The state of each of KEYS, in one round trip, with its pause. Redlock: every node is asked at
// once, and each key's state is what a quorum of them says (docs/DESIGN.md, "Topologies");
// fewer than a quorum answering is a failure (kind connect) that names them.
Result<std::vector<LockState>> read_locks(Redis& redis, const std::vector<std::string>& keys,
                                          Unknown unknown = Unknown::fails);

// A lock `list` found, before its state is read: its name, the server it is on, and what a
// first look saw, so that the read asks only for what matters to it. A few bytes besides the
// name: list sorts these, never the states, and so needs memory for the names alone.
struct FoundLock {
  enum class Seen : uint8_t {
    value,   // the key is a string: a lock's value, rlock's or another program's
    places,  // no key, but a semaphore's or a shared lock's places
    other,   // a key of another type: not a lock
    free,    // neither: a free lock, for list --all (shown when it has a history or a pause)
  };
  std::string key;
  uint32_t server = 0;  // in FoundLocks::servers
  Seen seen = Seen::value;
  bool foreign = false;  // found as another program's lock: a plain string with an expiry
};

struct FoundLocks {
  // The servers that hold a share of the keys (Redis::for_each_primary gave them, and they
  // live as long as the Redis does): each of a Cluster's primaries, each Redlock node.
  std::vector<Redis*> servers;
  std::vector<FoundLock> locks;  // sorted by key, each key once
  bool all = false;              // free locks too (list --all)
  Redis* redlock = nullptr;      // Redlock: its locks are read by quorum (read_locks)
  // When the holders last printed too (list --last-output): one more command per lock, which
  // list spares otherwise (docs/PERFORMANCE.md "Footprint and list").
  bool last_output = false;
};

// Every lock whose key matches PATTERN (a Redis glob): rlock's locks and semaphores, found by
// their fence counters, and, when PATTERN is not "*", plain strings with an expiry that match
// it (other software's locks). Found with SCAN, never KEYS; rlock's helper keys are left out,
// and no value is read of a key that is neither. A lock found on any Redlock node is listed
// once, and read by quorum. ALL: free locks too (list --all), which read_found_locks() gives when
// they have a history or a pause.
Result<FoundLocks> find_locks(Redis& redis, const std::string& pattern, bool all = false);

// The state of FOUND's locks, in their order, handed to EACH a batch at a time, as each batch
// is read: a few pipelined commands per lock, one round trip per batch and server, the next
// batch read (on a thread of its own) while EACH has this one. A lock that has become free
// since it was found is left out. EACH runs on the caller's thread, and may throw.
Result<Unit> read_found_locks(const FoundLocks& found,
                              const std::function<void(const std::vector<LockState>&)>& each);

}  // namespace rlock
