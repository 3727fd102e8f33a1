// Pauses (rlock pause, rlock resume): while KEY is paused nobody takes its lock, on any host;
// a command already running is not touched (that is rlock stop).
//
// Keys of lock KEY (in KEY's hash slot, like the lock's other helpers; lock.h):
//   {KEY}:rlock:pause  who paused it, when, until when and why (PauseInfo's text), expiring at
//                      the pause's end: a pause leaves nothing behind
// The acquire scripts look at it once the lock is free (paused() in lua/common.lua): a busy
// lock costs nothing more. A waiter waits through a pause as through a held lock.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "redis/redis.h"
#include "util/duration.h"
#include "util/error.h"
#include "util/wall_time.h"

namespace rlock {

struct PauseInfo {
  std::string by;      // USER@HOST
  std::string at;      // when it was paused, by the server's clock (RFC 3339)
  std::string until;   // when it ends, by the server's clock (RFC 3339)
  std::string reason;  // --reason, or empty
};

// "rlock-pause/1 by=alice@ops-1 at=... until=... reason=db maintenance": the reason last, as
// it may hold spaces; the others never do.
std::string encode_pause(const PauseInfo& pause);
std::optional<PauseInfo> decode_pause(std::string_view text);

// "paused by alice@ops-1 until 2026-12-04T10:30:00.000Z, 25m from now: db maintenance", with
// PTTL the pause's time left; escaped, as it comes from another host.
std::string pause_text(const PauseInfo& pause, Millis pttl);
// pause_text() of a pause's raw TEXT, or of what it is when it does not decode.
std::string pause_text(std::string_view text, Millis pttl);

// When a pause ends: after a duration from now (the server's), or at a time.
struct PauseEnd {
  std::optional<Millis> after;  // --for
  std::optional<WallTime> at;   // --until
};

struct Paused {
  bool ended_already = false;  // AT is not after the server's now: nothing was changed
  std::string text;            // the pause now
  Millis pttl{0};
  std::string replaced;      // the pause it replaced, or empty
  bool held = false;         // the lock is held now (its run goes on)
  Millis replaced_pttl{-2};  // what was left of the pause it replaced
};

// Pauses KEY with PAUSE (its at and until are the server's) until END. Under Redlock every
// node gets it.
Result<Paused> pause_lock(Redis& redis, const std::string& key, const PauseInfo& pause,
                          const PauseEnd& end, TimePoint deadline);
// Ends KEY's pause, waking its first waiter: the pause's text, or nothing when there was none.
Result<std::optional<std::string>> resume_lock(Redis& redis, const std::string& key,
                                               TimePoint deadline);

}  // namespace rlock
