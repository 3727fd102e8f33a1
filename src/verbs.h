// The verbs: one function each, taking parsed options and returning the exit status.
#pragma once

#include "options.h"

namespace rlock {

class Redis;

// The Redis that GlobalOptions point at (URL from the flag, $RLOCK_REDIS_URL, or the default).
std::unique_ptr<Redis> connect_redis(const GlobalOptions& global);

int run_verb(const GlobalOptions& global, const RunOptions& options);

}  // namespace rlock
