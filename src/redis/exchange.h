// Several servers asked at once from one poll(), as Redlock's masters, a Cluster's nodes and
// Sentinel's sentinels are asked.
#pragma once

#include <vector>

#include "redis/redis.h"
#include "redis/redis_node.h"
#include "redis/reply.h"
#include "util/clock.h"
#include "util/error.h"

namespace rlock {

// Sends each node its commands and reads their replies, all nodes at once from one poll():
// connects, TLS handshakes, writes and reads overlap, so the slowest node, not the sum of
// them, sets the time. NODES[i] gets COMMANDS[i]; an empty list skips the node. Returns once
// it has heard ENOUGH (Redlock: the quorum's verdict), or every node has replied or failed, or
// DEADLINE passed; a node that has not replied by then is a failure for this call, and its
// connection throws the late replies away (Connection::abandon). The nodes still out when the
// verdict is known may be driven for a moment more (Enough::Rest).
std::vector<Result<std::vector<Reply>>> exchange(const std::vector<NodeRedis*>& nodes,
                                                 const std::vector<std::vector<Argv>>& commands,
                                                 TimePoint deadline, const Enough& enough = {});

}  // namespace rlock
