// The slot map of a Redis Cluster as one process knows it, for the Redis that routes by it
// (cluster.cpp): which master serves each hash slot, the nodes the map named, and how it is
// read again: from several seeds before the first command, after MOVED, and from the other
// nodes after a node failed (docs/DESIGN.md "Cluster failover").
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redis/cluster.h"
#include "redis/redis_node.h"

namespace rlock {

// Said of an address of several seeds that is a single server.
extern const char* const k_no_cluster_node;

// MESSAGE (a failure's, which names its server NAME) from after "NAME: ", without spaces at
// its end: "cannot connect to 10.0.0.5:6379: Connection refused" gives "Connection refused".
std::string without_name(const std::string& name, std::string_view message);

// Whether FAILURE says that a node, rather than rlock or its settings, failed: it refused the
// connection, dropped it, or did not answer. A refused TLS handshake or rlock's own shortage
// of descriptors is no reason to look for another node.
bool node_failed(const Failure& failure);

class SlotMap {
public:
  // SEEDS: one URL's addresses (parse_redis_seeds), all of one Cluster when more than one.
  SlotMap(const std::vector<RedisUrl>& seeds, const ConnectOptions& options);

  // The URL, redacted.
  const std::string& name() const { return name_; }
  // Where keyless commands go, and every command before the map is known: the first seed
  // that answered.
  NodeRedis* seed() const { return seed_; }
  // Whether a map was read: the server is a Cluster.
  bool known() const { return !slots_.empty(); }
  // The master of KEY's slot, or null (no map yet, or a slot no master serves).
  NodeRedis* master_of(std::string_view key) const;
  // Every master the map names, once each.
  std::vector<NodeRedis*> masters() const;
  // The node at HOST:PORT, reached like the seed (scheme, user, password, TLS).
  NodeRedis* node_at(const std::string& host, int port);

  // Several seeds: the map, read before the first command, as a Cluster's clients do. A seed
  // that answers as a single server is refused while it answers; seeds that refuse CLUSTER
  // SLOTS give no map (MOVED teaches it). The failure that ends the call, or nothing.
  std::optional<Failure> map_of_seeds(TimePoint deadline);
  // After FAILURE at FAILED: the map anew from another node, at most every 500 ms; whether
  // one was read. A failure that could not be followed then is kept for read_map_if_stale().
  bool refresh_after_failure(NodeRedis* failed, TimePoint deadline, const Failure& failure);
  // Before sending: the map read again after a failure that could not be followed then.
  void read_map_if_stale(TimePoint deadline);
  // After MOVED to TARGET: the whole map again, R's slot on TARGET whatever it says.
  void learn(const Redirect& r, NodeRedis* target, TimePoint deadline);
  // CLUSTER SLOTS of FROM into the map: why FROM gave none, or nothing.
  std::optional<Failure> read_map(NodeRedis& from, TimePoint deadline);
  // FAILURE, with why no other node stood in: those asked for the map in vain, and an address
  // of the URL that is a single server.
  Failure explained(Failure failure) const;

private:
  NodeRedis* first_map(std::vector<NodeRedis*> candidates, TimePoint deadline,
                       std::optional<Failure>& first);
  NodeRedis* node_at(const std::string& host, int port, const RedisUrl& like,
                     const ConnectOptions& options);

  std::map<std::string, std::unique_ptr<NodeRedis>> nodes_;  // every node, by endpoint
  std::vector<NodeRedis*> seeds_;                            // the URL's addresses
  NodeRedis* seed_;                // the one keyless commands go to: the first that answers
  std::string name_;               // the URL, redacted
  std::vector<NodeRedis*> known_;  // every node a map named, masters and replicas
  std::vector<NodeRedis*> slots_;  // empty: not known to be a Cluster
  std::string stray_;              // an address that has cluster support disabled
  TimePoint next_refresh_{};       // refresh_after_failure() not before
  std::map<NodeRedis*, TimePoint> failed_at_;  // when a node last failed us
  std::string unreached_;     // the nodes the last refresh asked in vain, and why (explained())
  bool map_refused_ = false;  // the seeds refuse CLUSTER SLOTS: MOVED teaches the map
  struct StaleMap {
    NodeRedis* node;  // a node that failed since the map was last read
    Failure failure;
  };
  std::optional<StaleMap> stale_;  // read_map_if_stale()
};

}  // namespace rlock
