// What the verbs share (each verb's own code and its command's entry are in verbs/VERB.cpp,
// command.h says what an entry declares).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lock/lock.h"
#include "lock/lock_state.h"
#include "run/wait.h"
#include "settings/connect.h"
#include "settings/options.h"
#include "settings/settings.h"
#include "util/error.h"

namespace rlock {

class Redis;

// The exit status of a failure to reach Redis: 69, but 125 when rlock's own process ran out of
// descriptors, processes or memory (Why::out_of_resources), which is no news of Redis.
int failure_exit_status(const Failure& failure);

// A Redis failure before anything started: one line on stderr, exit 69 (or 125, above).
int unavailable(const Failure& failure);

// Warns of each helper key of LOCKS that holds another type than rlock keeps there
// (docs/DESIGN.md, "Reads with a bound"): status, inspect and list say it, the lock shown all
// the same.
void warn_wrong_types(const std::vector<LockState>& locks);
// Redlock: a warning for each node that did not answer the read of LOCKS, and why.
void warn_unanswered(const std::vector<LockState>& locks);

// The exit status for a wait that did not get the lock (busy, interrupted, not a lock, Redis
// unavailable), having said why on stderr; nullopt when it got the lock.
std::optional<int> exit_unless_obtained(const WaitOutcome& outcome, const RunOptions& options);

// The token of the lock KEY that this process tree already holds (RLOCK_KEY and RLOCK_TOKEN
// in our environment, still ours in Redis): a nested run or acquire of KEY must go straight
// through instead of waiting for itself. A stale or forged token is ignored.
std::optional<std::string> inherited_token(Redis& redis, const RunOptions& options);

LockMode lock_mode(const RunOptions& options);

// Refuses (usage error, before any I/O) what a topology cannot honour: --limit, --fair,
// --min-replicas and --once-per with Redlock.
void check_topology(const Redis& redis, const RunOptions& options);
// Usage error unless TOKEN looks like one rlock makes.
void check_token(const std::string& token);
// TEXT as a duration above 0 for option FLAG ("--for"), or a usage error that says why.
Millis positive_duration(const char* flag, const std::string& text);

}  // namespace rlock
