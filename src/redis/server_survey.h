// What servers say of themselves, for rlock doctor: a server's INFO, the settings that matter to
// a lock (CONFIG GET, which an ACL may deny), its clock against ours and how it sees our
// connection; what the sentinels say of a primary and its replicas; a Cluster's nodes. Every
// command here only reads.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "redis/redis_node.h"
#include "redis/sentinel.h"
#include "util/clock.h"
#include "util/duration.h"
#include "util/error.h"

namespace rlock {

using Fields = std::map<std::string, std::string>;

// FIELDS' NAME, or "".
std::string field_of(const Fields& fields, const std::string& name);
// TEXT as a whole number, or nothing.
std::optional<int64_t> whole_number(const std::string& text);

// The settings survey_server() asks for, one CONFIG GET each (Redis 6 takes one at a time).
inline constexpr const char* k_surveyed_settings[] = {"appendonly",
                                                      "appendfsync",
                                                      "save",
                                                      "maxmemory",
                                                      "maxmemory-policy",
                                                      "notify-keyspace-events",
                                                      "repl-diskless-sync",
                                                      "repl-diskless-sync-delay",
                                                      "cluster-node-timeout",
                                                      "timeout",
                                                      "min-replicas-to-write"};

struct ServerSurvey {
  std::string name;                    // the server's redacted URL
  std::optional<Failure> unreachable;  // why it gave no answer; nothing else is known then
  Fields info;                         // INFO's fields ("redis_version", "aof_enabled" ...)
  std::string info_refused;            // INFO's error reply, when it gave none (an ACL)
  Fields config;                       // each setting CONFIG GET gave
  std::string config_refused;          // CONFIG GET's error reply (an ACL, a renamed CONFIG)
  std::optional<Millis> clock_ahead;   // its clock less ours, within round_trip / 2
  Millis round_trip{0};
  std::string local_address;  // CLIENT INFO's laddr: the server's end of our connection
  std::optional<int64_t> certificate_expires;  // TLS: its certificate's notAfter (epoch s)

  // INFO's field NAME, or "".
  std::string field(const std::string& name) const { return field_of(info, name); }
};

// Asks NODE, within DEADLINE, in one round trip.
ServerSurvey survey_server(NodeRedis& node, TimePoint deadline);

// What one sentinel says of the primary it watches as MASTER_NAME.
struct SentinelView {
  std::string sentinel;  // its redacted URL
  std::optional<Failure> failure;
  Fields master;                 // SENTINEL MASTER: ip, port, down-after-milliseconds ...
  std::vector<Fields> replicas;  // SENTINEL REPLICAS: ip, port, flags, master-link-status ...
};
// Asks SENTINEL without a password first (sentinels often have none), then with the URL's.
SentinelView ask_sentinel(const RedisUrl& sentinel, const std::string& master_name,
                          const ConnectOptions& options, TimePoint deadline);

// A Cluster's master and its replicas, from CLUSTER SLOTS (which docs/REDIS.md "Least privilege"
// grants, where CLUSTER NODES is not): a replica that failed is left out.
struct ClusterShard {
  std::string host;
  int port = 0;
  std::vector<std::pair<std::string, int>> replicas;  // host, port
};
// CLUSTER SLOTS of NODE, a shard per master; a failure of kind server for a single server
// ("cluster support disabled") or an ACL's denial.
Result<std::vector<ClusterShard>> cluster_shards(NodeRedis& node, TimePoint deadline);

// URL with its host and port replaced: another server of the same topology, reached with the
// same scheme, user, password and database.
RedisUrl at_address(RedisUrl url, const std::string& host, int port);

}  // namespace rlock
