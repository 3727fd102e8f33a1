// The command rlock run starts, and what must hold before it starts (README.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lock/stop_request.h"
#include "process/child.h"
#include "settings/settings.h"
#include "util/clock.h"

namespace rlock {

class Lock;

// The command to start: COMMAND, or $SHELL -c TEXT.
std::vector<std::string> command_argv(const RunOptions& options);

// The start of ARGV (found at PROGRAM; empty: searched) under the lock with TOKEN and FENCE: the
// lock's environment (RLOCK_KEY ...; RLOCK_ATTEMPT=1 with --retry), none of rlock's Redis secrets.
Child::Spec command_spec(const RunOptions& options, const std::vector<std::string>& argv,
                         const std::string& program, const std::string& token, int64_t fence);
// Keeps rlock's Redis secrets from a process it starts: RLOCK_PASSWORD unset, RLOCK_REDIS_URL
// without its password; REDISCLI_AUTH too unless KEEP_REDISCLI_AUTH (redis-cli's own, which a job
// may use for its own Redis).
void keep_secrets(std::vector<std::string>& env, std::vector<std::string>& unset,
                  bool keep_rediscli_auth);

// The name that goes into the lock value and the history: the program, never its arguments nor
// an assignment (`PGPASSWORD=... psql` is psql).
std::string command_name(const RunOptions& options);

// A command that cannot run must not take the lock (and a typo must not keep others out): its
// exit status when the exec form's ARGV cannot run, having said why. PROGRAM gets where the
// command is, so that the child need not search again.
std::optional<int> refuse_unrunnable(const RunOptions& options,
                                     const std::vector<std::string>& argv, std::string* program);

// When the command's lease begins: at acquisition, unless the reply came so late (a paused or
// overloaded Redis) that less than half is left; the lease counts from the sending, so the
// command would die at once: renew first, from now. Nothing (the lock to be given back) on failure.
std::optional<TimePoint> fresh_lease(Lock& lock, Millis ttl, TimePoint acquire_sent);

// When a run begins to listen for rlock stop (stop_request.h): a request is acted on within a
// second, and a command that ends sooner (the herd's short jobs) costs Redis no connection.
inline constexpr Millis k_stop_listen_after{500};

// Listens for rlock stop's requests to LOCK's holder into STOPS, on a connection CONNECT makes
// AFTER from now, on a thread of its own: the listener, or null when it cannot (ulimit -n, -u;
// said) and the run goes on deaf to rlock stop: the operator's tool fails, not the job.
StopListener* listen_for_stops(std::optional<StopListener>& stops, StopListener::Connect connect,
                               const Lock& lock, Millis after = k_stop_listen_after);

// The nested run of a lock this process tree holds: become the command, which runs under the
// outer rlock's lock and lease.
int exec_straight_through(std::vector<std::string> argv);

}  // namespace rlock
