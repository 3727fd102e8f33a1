// The lock protocol: the Lua scripts and the four operations on one lock key. It speaks to "a
// Redis" (redis.h) and knows nothing of processes, time policy or the command line.
#pragma once

#include <string>
#include <string_view>
#include <variant>

#include "clock.h"
#include "duration.h"
#include "error.h"
#include "redis.h"

namespace rlock {

// The name of a helper key of KEY (the fence counter, later queues and semaphores), chosen to
// live in KEY's Redis Cluster hash slot so one script may touch both:
//   KEY has a hash tag ("job:{42}")  -> "job:{42}:rlock:fence"  (appending keeps the tag)
//   KEY has no '}'    ("lock:daily") -> "{lock:daily}:rlock:fence"  (the whole key is the tag)
// A key with a '}' but no tag ("a}b") cannot be tagged; its helpers share a slot only outside
// Cluster.
std::string helper_key(std::string_view key, std::string_view kind);

// Whether KEY is one of rlock's helper keys (a fence counter ...), which are never locks.
bool is_helper_key(std::string_view key);

struct Acquired {
  int64_t fence;
};
struct Busy {
  std::string value;  // the holder's raw value
  Millis pttl;        // time to its expiry; negative when the key has no TTL
};
struct WrongType {
  std::string type;  // the key holds a hash, a list ...: not a lock
};
using AcquireOutcome = std::variant<Acquired, Busy, WrongType>;

class Lock {
public:
  Lock(Redis& redis, std::string key, std::string token);

  const std::string& key() const { return key_; }
  const std::string& token() const { return token_; }
  // The connection's per-command timeout, for callers without a tighter deadline.
  Millis command_timeout() const { return redis_.command_timeout(); }

  // SET KEY VALUE NX PX TTL and INCR of the fence counter, in one step. VALUE is
  // encode_lock_value() of our holder without a fence. Retrying after a lost reply is safe:
  // a value that is already ours counts as acquired.
  Result<AcquireOutcome> try_acquire(const std::string& value, Millis ttl, TimePoint deadline);
  // Sets the TTL of our lock to TTL; false when the lock is not ours (gone, or someone else's).
  Result<bool> renew(Millis ttl, TimePoint deadline);
  // Deletes our lock; false when it was not ours, and then nothing changed.
  Result<bool> release(TimePoint deadline);

private:
  Redis& redis_;
  std::string key_;
  std::string fence_key_;
  std::string token_;
  std::string prefix_;  // owner_prefix(token_)
};

}  // namespace rlock
