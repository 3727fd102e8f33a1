// The verbs: one function each, taking parsed options and returning the exit status.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "error.h"
#include "lock.h"
#include "options.h"
#include "settings.h"
#include "wait.h"

namespace rlock {

class Fd;
class PidWatch;
class Redis;
class SignalEvents;

// The Redis that GlobalOptions point at, with its password read (from a password file too).
std::unique_ptr<Redis> connect_redis(const GlobalOptions& global);

int run_verb(const GlobalOptions& global, const RunOptions& options);

// status KEY...: 0 every key held, 1 some key free, 69 Redis unreachable or a key not a lock.
int status_verb(const GlobalOptions& global, const std::vector<std::string>& keys, bool json);
// inspect KEY: 0 held, 1 free.
int inspect_verb(const GlobalOptions& global, const std::string& key, bool json);
// history KEY: the latest COUNT runs, newest first.
int history_verb(const GlobalOptions& global, const std::string& key, int count, bool json);
// watch KEY...: one line (or JSON object) per change of the locks, until a signal ends it
// (0); 69 when Redis cannot be reached at the start, or refuses us.
int watch_verb(const GlobalOptions& global, const std::vector<std::string>& keys, bool json);
// list [PATTERN]: every lock under the prefix that matches.
int list_verb(const GlobalOptions& global, const std::string& pattern, bool json);
// acquire KEY: takes the lock (waiting as OPTIONS say) and prints its token.
// With WHILE_PID, a detached keeper renews it while that process lives (keeper.cpp).
int acquire_verb(const GlobalOptions& global, const RunOptions& options, bool json,
                 std::optional<int> while_pid = std::nullopt);
// extend KEY --token T: 0 renewed, 1 not ours.
int extend_verb(const GlobalOptions& global, const std::string& key, const std::string& token,
                Millis ttl);
struct ReleaseOptions {
  std::optional<std::string> token;
  bool force = false;  // break it whoever holds it (only TOKEN's, when given)
  bool now = false;    // with FORCE: delete, not a tombstone
  bool all = false;    // with FORCE: every place of a semaphore
};
// release KEY --token T: 0 released, 1 not ours. With FORCE: breaks anyone's lock.
int release_verb(const GlobalOptions& global, const std::string& key,
                 const ReleaseOptions& options);
// check KEY --every PERIOD: 0 a run succeeded within the period, 1 none did.
int check_verb(const GlobalOptions& global, const CheckOptions& options);
// reset-period KEY --once-per P: 0 this period's run forgotten, 1 none or still running.
int reset_period_verb(const GlobalOptions& global, const RunOptions& options);
// Prints every setting, its value (secrets redacted) and where it came from.
// RESOLVED gives the defaults that follow from other settings (kill-after from the ttl ...).
int config_verb(const RawSettings& settings, const Resolved& resolved,
                const std::optional<std::string>& config_file, bool json);

// A Redis failure before anything started: one line on stderr, exit 69.
int unavailable(const Failure& failure);

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

// acquire --while-pid (keeper.cpp): forks the detached keeper that holds GOT for as long as
// PID lives, told of a release through LINK. False when the fork failed.
bool start_keeper(Lock& lock, const Obtained& got, const RunOptions& options, const PidWatch& pid,
                  const Fd& link, SignalEvents& signals);

}  // namespace rlock
