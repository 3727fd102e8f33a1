// What the settings (settings.h: flags, environment, config file, defaults) and the command
// line decided, as plain typed values. The verbs take these and never see CLI11.
#pragma once

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "redis/connection.h"
#include "util/duration.h"
#include "util/exit_status.h"
#include "util/log.h"
#include "util/period.h"

namespace rlock {

inline constexpr Millis k_default_ttl{30'000};
inline constexpr Millis k_default_retention{30LL * 24 * 3600 * 1000};
// The most --keep-output takes: Redis keeps at most this for each of a key's kept runs
// (k_kept_runs, lock/kept_output.h).
inline constexpr uint64_t k_max_keep_output = uint64_t(16) << 20;
inline constexpr uint64_t k_min_keep_output = 1024;

struct GlobalOptions {
  std::vector<std::string> redis_urls;
  bool redis_url_is_default = false;  // no --redis, RLOCK_REDIS_URL or config file named one
  std::string prefix;                 // prepended to every key
  Verbosity verbosity = Verbosity::normal;
  LogFormat log_format = LogFormat::text;
  ConnectOptions connect;  // TLS material, timeouts, where the password comes from
};

struct RunOptions {
  std::string key;
  std::vector<std::string> command;          // exec'd as is (argv), or:
  std::optional<std::string> shell_command;  // -c TEXT, run by $SHELL or /bin/sh
  std::optional<Millis> wait;                // nullopt: fail fast; Millis::max(): for ever
  std::optional<Millis> jitter;              // a random pause in [0, jitter) before the first try
  int conflict_exit_code = k_exit_busy;
  Millis ttl = k_default_ttl;
  std::optional<Millis> max_run;
  // --heartbeat-file F --stale-after D: the command is hung when F has not changed for D.
  std::optional<std::string> heartbeat_file;
  std::optional<Millis> stale_after;
  int kill_signal = SIGTERM;
  Millis kill_after{};  // --kill-after, or default_kill_after(ttl) (resolve_settings)
  enum class OnLost { kill, ignore } on_lost = OnLost::kill;
  // What to do with processes the command left running in its process group when it exits.
  enum class Leftovers { wait, kill } leftovers = Leftovers::wait;
  std::optional<Millis> min_hold;
  int limit = 0;         // --limit N (N > 1): a semaphore; 0 or 1: the plain lock
  bool fair = false;     // --fair: waiters in arrival order
  bool shared = false;   // --shared: one of any number of shared holders (flock -s)
  int min_replicas = 0;  // --min-replicas N: WAIT until N replicas have the lock (and renewals)
  std::optional<std::string> metrics_file;  // Prometheus textfile to add this run to
  std::optional<Period> once_per;           // --once-per: at most one run per period
  std::optional<std::string> tz;            // --tz: the zone of calendar periods (else UTC)
  bool retry_failed = false;                // --once-per: a failed run does not count
  bool record_skips = false;                // history also gets busy and done-this-period
  // --retention: how long a lock's fence counter and history outlive its last use; 0: for ever.
  Millis retention = k_default_retention;
  int history_length = 100;  // --history-length: entries kept; 0: no history
  uint64_t keep_output = 0;  // --keep-output: the last bytes of the output kept; 0: none
  // --retry N: up to N more attempts of a command that failed, under the same lock; the first
  // after --retry-delay, each later one after twice the last (k_max_retry_delay at most). Only
  // the exit statuses in --retry-on are retried (none listed: any but 0).
  int retry = 0;
  Millis retry_delay{1000};
  std::vector<int> retry_on;
  // --notify CMD: run by /bin/sh -c once the run is over and the lock given back, when
  // notify_on and notify_after say so, for at most notify_timeout.
  std::optional<std::string> notify;
  enum class NotifyOn { failure, change, always } notify_on = NotifyOn::failure;
  int notify_after = 1;  // consecutive failures across the fleet before a failure is told
  Millis notify_timeout{10'000};
};

inline constexpr Millis k_max_retry_delay{3600 * 1000};

// --retry: whether an attempt that exited with STATUS is worth another (--retry-on), and the
// delay before attempt N + 1.
inline bool worth_another_attempt(const RunOptions& options, int status) {
  if (status == 0) return false;
  const auto& codes = options.retry_on;
  return codes.empty() || std::binary_search(codes.begin(), codes.end(), status);
}
inline Millis retry_delay(const RunOptions& options, int n) {
  Millis delay = options.retry_delay;
  for (int i = 1; i < n && delay < k_max_retry_delay; ++i) delay *= 2;
  return std::min(delay, k_max_retry_delay);
}

// rlock check KEY --every PERIOD.
struct CheckOptions {
  std::string key;
  std::string every_text;         // as typed, for messages: "25h", "day"
  Period every;                   // the window: a duration, or the current calendar period
  std::optional<std::string> tz;  // --tz: the zone of a calendar period (else UTC)
  bool json = false;
  std::optional<Millis> slower_than;  // the last success must have taken no longer
};

}  // namespace rlock
