// Redlock over independent masters: docs/DESIGN.md "Topologies", docs/REDIS.md.
//
// Every lock operation goes to all N nodes at once (one round trip) and is believed by quorum,
// N/2+1 (lock.cpp): an acquisition counts only with a quorum of nodes and time left in it
// (validity = ttl - elapsed - drift); a renewal keeps the lease only while a quorum renews;
// a release goes to all. The fence is the largest any quorum node drew: best effort, since
// each node counts on its own.
#pragma once

#include <memory>
#include <vector>

#include "redis/connection.h"
#include "redis/redis.h"
#include "redis/redis_url.h"

namespace rlock {

inline size_t redlock_quorum(size_t nodes) { return nodes / 2 + 1; }

// What an operator's verb waits for (status, pause, resume ...): a quorum's replies, then the
// others' for a moment (Enough::Rest::answered), so that a node that is frozen or away costs
// k_send_grace, not a command timeout, and is named as not having answered.
inline Enough quorum_then_the_rest(size_t nodes) {
  return Enough{redlock_quorum(nodes), {}, Enough::Rest::answered};
}

std::unique_ptr<Redis> make_redlock_redis(const std::vector<RedisUrl>& urls,
                                          const ConnectOptions& options);

}  // namespace rlock
