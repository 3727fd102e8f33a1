// A proxy in front of Redis that does not pass a command (twemproxy) closes the connection at
// it, as a server that went down does: name_refused_command() tells the two apart, so that the
// failure names the command and what rlock needs it for.
#pragma once

#include <vector>

#include "redis/redis_node.h"
#include "redis/reply.h"
#include "util/error.h"

namespace rlock {

// After FAILURE to COMMANDS sent to NODE, when the other end closed the connection before any
// reply (Why::closed): which command made it close, found by sending each kind of command
// that can go without effect (one that only reads; XADD with ID 0-0, which Redis refuses;
// EVALSHA of no script) alone on a connection of its own, after a PING that must pass (a
// proxy whose server is down closes every connection at once). A proxy that does not pass a command
// (twemproxy) closes the connection at it: the failure then names it, and what rlock needs it
// for (Why::refused_command). Else FAILURE as it was: a server gone down, an idle timeout.
Failure name_refused_command(NodeRedis& node, const std::vector<Argv>& commands, Failure failure);

}  // namespace rlock
