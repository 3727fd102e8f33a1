// From settings to "a Redis": which URL, which password (a password file, a password command),
// and which implementation serves it (one server, Cluster, Sentinel, Redlock's nodes).
#pragma once

#include <memory>

#include "settings/options.h"

namespace rlock {

class Redis;

// The Redis that GlobalOptions point at, with its password read (from a password file too).
// AGAIN: a second one in the same process (a thread's own), which says nothing said before.
std::unique_ptr<Redis> connect_redis(const GlobalOptions& global, bool again = false);

}  // namespace rlock
