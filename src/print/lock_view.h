// A lock as status, list, inspect and watch show it: what was read (LockState, lock_state.h)
// judged once, at one moment of this host's clock: which state, whose value, how long it has
// been held, whether its holder still runs here. The text and the JSON renderers (output_*.cpp)
// both format a LockView and decide nothing of their own, so the two cannot disagree.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lock/history.h"
#include "lock/lock_state.h"
#include "lock/lock_value.h"
#include "lock/pause.h"
#include "lock/run_phase.h"
#include "util/duration.h"
#include "util/wall_time.h"

namespace rlock {

// What a holder's run is doing when not simply running (run_phase.h), at the server's clock:
// how long since it began, and until what it waits for is due (< 0: past).
struct PhaseView {
  RunPhase phase;
  Millis ago{0}, due_in{0};
  int64_t since_ms = 0, due_ms = 0;  // the server's clock
};

// Who a value rlock wrote names: the lock's holder or a place's, or in a tombstone the holder
// that was broken.
struct HolderView {
  Holder who;
  Liveness liveness = Liveness::unknown;  // told once, as holder_liveness() judges it
  std::string token;                      // "": a tombstone of another program's lock
  std::optional<int64_t> fence;
  std::optional<Breaking> broken;      // a tombstone: who broke the lock, when
  Millis broken_ago{0};                // since then, >= 0
  Millis held{0};                      // since who.since, >= 0
  std::optional<int64_t> command_pid;  // its command's, on this host (holder_command_pid)
  std::optional<PhaseView> phase;      // status and inspect: its run stops, or waits to retry
  // When its command last printed, by the server's clock, and how long ago: its run keeps its
  // output (--keep-output) and has printed.
  std::optional<WallTime> last_output;
  Millis last_output_ago{0};  // >= 0
};

// One place of a semaphore (--limit) or of a shared lock (--shared) that has not expired.
struct PlaceView {
  std::string token;  // the place's
  std::string value;  // as stored
  Millis ttl{0};
  std::optional<HolderView> holder;  // nullopt: a value rlock did not write
};

struct LockView {
  std::string key;
  LockState::Kind kind = LockState::Kind::free;
  std::string type;  // not_a_lock: the key's Redis type
  // The key holds a value (held, broken, foreign): VALUE as stored, with TTL (-1: no expiry).
  bool has_value = false;
  std::string value;
  Millis ttl{-2};
  std::optional<HolderView> holder;  // the value is rlock's
  int64_t waiters = 0;               // alive
  std::vector<QueuedWaiter> queue;   // every waiter in arrival order, dead ones too
  std::vector<PlaceView> semaphore;  // its places, whatever KIND says (inspect shows both)
  std::vector<PlaceView> shared;     // --shared places, by expiry
  int64_t not_shown = 0;             // waiters and places past the bound, not read
  std::optional<int64_t> fence_counter;
  // How long the fence counter and the history are kept (--retention): -1 for ever, -2 absent.
  Millis fence_counter_kept{-2};
  Millis history_kept{-2};
  std::optional<RunRecord> last_run;  // the newest run that ran
  Millis last_run_ago{0};             // since it ended, >= 0
  std::optional<PauseInfo> pause;     // rlock pause: nobody takes it until PAUSE.until
  std::string pause_raw;              // the pause's text, also when it does not decode
  Millis pause_ttl{-2};
  NodeVotes votes;                   // Redlock: how many nodes say so, and which did not answer
  std::optional<Minority> minority;  // Redlock: free, yet held on fewer nodes than a quorum
};

// STORED as shown at the server's NOW_MS.
PhaseView view_phase(const StoredPhase& stored, int64_t now_ms);
// The value V as shown at NOW.
HolderView view_holder(const LockValue& v, WallTime now);
// S as shown at NOW (this host's clock: how long a holder has held it, how long ago it was
// broken, or its last run ended).
LockView view_lock(const LockState& s, WallTime now);

}  // namespace rlock
