// What a held lock's run is doing when it is not simply running: stopping its command (the
// kill signal sent, SIGKILL due), or waiting for its next attempt (--retry). The run's
// supervisor decides it; the renewal thread carries it to Redis on its next renewal, which it
// makes at once (Renewals::set_phase); status and inspect read it (lock_state.h).
//
// Stored in {KEY}:rlock:phase, a hash of token -> "since=MS due=MS " and encode_run_phase()'s
// text, the times the server's (the renew script turns "so long ago, due in so long" into its
// own clock). Written only by a renewal that found the lock ours, with the lock's ttl, and
// removed by the release: the phase dies with the hold (docs/DESIGN.md "What a run is doing").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "util/clock.h"

namespace rlock {

struct RunPhase {
  enum class Kind { running, stopping, retrying };
  Kind kind = Kind::running;
  // stopping: the end the run is stopped for (run_end_name(): stopped, lost, max_run, hung),
  // or "leftovers" (--leftovers kill); the signal sent ("TERM"); for rlock stop, its asker
  // (USER@HOST) and its reason.
  std::string why{}, signal{}, by{}, reason{};
  // retrying: the attempt to come, of how many, and the exit status of the one that ended.
  int attempt = 0, attempts = 0;
  std::optional<int> last_status{};
  // This host's clock: the phase began (the signal sent, the attempt ended); what it waits for
  // is due (SIGKILL, the next attempt).
  TimePoint since{}, due{};
};

// "stopping why=stopped signal=TERM by=alice@ops-1 reason=db%20maintenance",
// "retrying attempt=2 attempts=4 status=1": the phase as the renew script stores it, without
// its times. Values are percent-escaped as the lock's value's are.
std::string encode_run_phase(const RunPhase& phase);

// A phase read back: the server's clock when it began and when its wait ends.
struct StoredPhase {
  RunPhase phase;
  int64_t since_ms = 0, due_ms = 0;
};
// What the script stored ("since=MS due=MS " and encode_run_phase()'s text); nothing when it
// does not decode (another program's data under our helper's name).
std::optional<StoredPhase> decode_run_phase(std::string_view stored);

const char* run_phase_name(RunPhase::Kind kind);

}  // namespace rlock
