// The slot map of a Redis Cluster as one process knows it (cluster_map.h): read before the
// first command from several seeds, again after MOVED, and again from the other nodes after a
// node's failure. docs/DESIGN.md "Cluster failover".
#include "redis/cluster_map.h"

#include <algorithm>

#include "util/log.h"

namespace rlock {

namespace {

// How often a process may read the slot map again after connection failures: a dead master is
// noticed by every command sent to it, and a fleet of waiters must not turn that into a storm
// of CLUSTER SLOTS on the nodes that are left.
constexpr Millis k_map_refresh_interval{500};

// A node that failed us this recently is asked for the map after the others.
constexpr Millis k_failed_of_late{10000};

// The least time a node is given to answer for the map while time is left (first_map).
constexpr Millis k_least_share{250};

}  // namespace

const char* const k_no_cluster_node =
    "address of the URL, is no Cluster node: the addresses of one URL are the seeds of one "
    "Cluster, and Redlock's servers are given as several --redis";

std::string without_name(const std::string& name, std::string_view message) {
  if (auto at = message.find(name + ": "); at != std::string_view::npos)
    message.remove_prefix(at + name.size() + 2);
  return std::string(message.substr(0, message.find_last_not_of(' ') + 1));
}

bool node_failed(const Failure& failure) {
  switch (failure.why) {
  case Failure::Why::tls_refused:
  case Failure::Why::refused_command:
  case Failure::Why::out_of_resources: return false;
  default: break;
  }
  return failure.kind == Failure::Kind::connect || failure.kind == Failure::Kind::io ||
         failure.kind == Failure::Kind::timeout;
}

SlotMap::SlotMap(const std::vector<RedisUrl>& seeds, const ConnectOptions& options) {
  for (const RedisUrl& url : seeds) seeds_.push_back(node_at(url.host, url.port, url, options));
  seed_ = seeds_.front();
  name_ = seed_->name();
  for (size_t i = 1; i < seeds_.size(); ++i) name_ += "," + seeds_[i]->url().endpoint();
}

NodeRedis* SlotMap::master_of(std::string_view key) const {
  if (slots_.empty()) return nullptr;
  return slots_[key_slot(key)];
}

std::vector<NodeRedis*> SlotMap::masters() const {
  std::vector<NodeRedis*> out;
  for (NodeRedis* n : slots_)
    if (n && std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  return out;
}

NodeRedis* SlotMap::node_at(const std::string& host, int port) {
  return node_at(host, port, seed_->url(), seed_->options());
}

// FAILURE, with why no other node stood in: those asked for the map in vain, and an address
// of the URL that is a single server.
Failure SlotMap::explained(Failure failure) const {
  if (!node_failed(failure)) return failure;
  if (!unreached_.empty()) failure.message += "; no slot map from " + unreached_;
  if (!stray_.empty()) failure.message += " (" + stray_ + ", another " + k_no_cluster_node + ")";
  return failure;
}

// Several seeds: the slot map, read before the first command, as a Cluster's clients do (the
// first command then goes straight to its key's master). A seed that answers as a single
// server is refused while it answers, not only once it is down: it could stand in for the
// Cluster on one host while another host, which cannot reach it, locks in the Cluster.
// Seeds that refuse CLUSTER SLOTS itself (an ACL without it, a managed service that renamed
// CLUSTER) give no map: then MOVED teaches it, as with one seed.
std::optional<Failure> SlotMap::map_of_seeds(TimePoint deadline) {
  if (seeds_.size() < 2) return std::nullopt;
  auto no_cluster = [&] {
    return Failure{Failure::Kind::server, name() + ": " + stray_ + ", an " + k_no_cluster_node};
  };
  if (!stray_.empty()) return no_cluster();  // for as long as this process lives
  if (!slots_.empty() || map_refused_) return std::nullopt;
  std::optional<Failure> first;
  NodeRedis* from = first_map(seeds_, deadline, first);
  if (!stray_.empty() && (from || !first || !node_failed(*first))) return no_cluster();
  if (from) {
    seed_ = from;  // keyless commands go to a node that answers
    return std::nullopt;
  }
  if (first && first->kind == Failure::Kind::server) {
    map_refused_ = true;
    return std::nullopt;
  }
  if (first) return explained(*first);
  return Failure{Failure::Kind::timeout, name() + ": no time left to read the slot map"};
}

// After FAILURE at FAILED: the slot map anew from the first other node that gives one, at
// most once per k_map_refresh_interval. Whether a map was read. The nodes the last map named
// are asked before the seeds (a seed's name may be another name of the node that failed). A
// node that says it is no Cluster node is passed over: several seeds are one Cluster's, and
// two servers that are not one must never stand in for each other (each host could lock in a
// different one).
// A failure that could not be followed then (a map read less than the interval ago, or no
// time left: a command that timed out took its deadline) is kept, and the next call reads the
// map first (read_map_if_stale), so that a master that stops answering is followed too.
bool SlotMap::refresh_after_failure(NodeRedis* failed, TimePoint deadline, const Failure& failure) {
  TimePoint now = Clock::now();
  stale_ = StaleMap{failed, failure};
  unreached_.clear();  // of an earlier refresh: not this failure's
  if (now < next_refresh_ || now >= deadline) return false;
  next_refresh_ = now + k_map_refresh_interval;
  failed_at_[failed] = now;
  std::vector<NodeRedis*> others;
  for (const auto* nodes : {&known_, &seeds_})
    for (NodeRedis* n : *nodes)
      if (n != failed && std::find(others.begin(), others.end(), n) == others.end())
        others.push_back(n);
  std::optional<Failure> first = failure;
  NodeRedis* from = first_map(std::move(others), deadline, first);
  if (!from) return false;
  stale_.reset();
  if (seed_ == failed) seed_ = from;  // keyless commands go to a node that answers
  log(Level::debug, {"cluster_map", "",
                     failure.message + "; slot map read again from " + from->url().endpoint()});
  return true;
}

// The first of CANDIDATES that gives the slot map (read_map), or null. Those that failed us
// of late are asked after the others, and each is given an equal share of the time left, so
// that one that does not answer cannot take it all. FIRST: the first failure, when it has
// none yet; the others' nodes are named in unreached_, for explained().
NodeRedis* SlotMap::first_map(std::vector<NodeRedis*> candidates, TimePoint deadline,
                              std::optional<Failure>& first) {
  TimePoint now = Clock::now();
  std::stable_partition(candidates.begin(), candidates.end(), [&](NodeRedis* n) {
    auto at = failed_at_.find(n);
    return at == failed_at_.end() || now - at->second > k_failed_of_late;
  });
  unreached_.clear();
  for (size_t i = 0; i < candidates.size(); ++i) {
    NodeRedis* n = candidates[i];
    now = Clock::now();
    if (now >= deadline) break;
    // A floor, lest a healthy node on a loaded host (a new connection, TLS, AUTH) miss a
    // share of a short deadline and go last for k_failed_of_late.
    Clock::duration left = deadline - now;
    auto share = std::max<Clock::duration>(left / static_cast<int>(candidates.size() - i),
                                           std::min<Clock::duration>(left, k_least_share));
    auto not_read = read_map(*n, now + share);
    if (!not_read) {
      unreached_.clear();
      return n;
    }
    if (node_failed(*not_read)) failed_at_[n] = Clock::now();
    if (!first)
      first = *not_read;
    else if (stray_ != n->url().endpoint())  // said apart (explained())
      unreached_ += (unreached_.empty() ? "" : ", ") + n->url().endpoint() + " (" +
                    without_name(n->url().endpoint(), not_read->message) + ")";
  }
  return nullptr;
}

// Before sending: the map read again after a node's failure that could not be followed
// then (refresh_after_failure).
void SlotMap::read_map_if_stale(TimePoint deadline) {
  if (!stale_) return;
  StaleMap stale = *stale_;  // a copy: the refresh replaces or clears stale_
  refresh_after_failure(stale.node, deadline, stale.failure);
}

// After MOVED: the whole map, which has likely changed for more than one slot. The slot
// itself goes to TARGET also when TARGET's map has it unassigned (a slot taken away from a
// node and given back, a migration's last step): else its commands would go to the seed,
// which sends them back to TARGET.
void SlotMap::learn(const Redirect& r, NodeRedis* target, TimePoint deadline) {
  bool loaded = !read_map(*target, deadline);
  if (slots_.empty()) slots_.assign(k_cluster_slots, nullptr);
  if (!loaded || !slots_[r.slot]) slots_[r.slot] = target;
}

// CLUSTER SLOTS of FROM into the map, every node it names (replicas too) known from then on.
// Why FROM gave no map, or nothing; one that has cluster support disabled is a single
// server, named in the failures that follow (stray_).
std::optional<Failure> SlotMap::read_map(NodeRedis& from, TimePoint deadline) {
  auto reply = from.call({"CLUSTER", "SLOTS"}, deadline);
  if (!reply) {
    if (reply.failure().message.find("cluster support disabled") != std::string::npos)
      stray_ = from.url().endpoint();
    return reply.failure();
  }
  if (!reply->is_array())
    return Failure{Failure::Kind::protocol, from.name() + ": CLUSTER SLOTS: not a slot map"};
  std::vector<NodeRedis*> slots(k_cluster_slots, nullptr);
  for (const Reply& range : reply->elements) {
    const auto& e = range.elements;
    if (e.size() < 3 || !e[0].is_integer() || !e[1].is_integer()) continue;
    NodeRedis* master = nullptr;
    for (size_t i = 2; i < e.size(); ++i) {
      const auto& node = e[i].elements;
      if (!e[i].is_array() || node.size() < 2 || !node[1].is_integer()) continue;
      std::string host = node[0].str;
      if (host.empty() || host == "?") host = from.url().host;  // "the address you asked"
      NodeRedis* n =
          node_at(host, static_cast<int>(node[1].integer), seed_->url(), seed_->options());
      if (std::find(known_.begin(), known_.end(), n) == known_.end()) known_.push_back(n);
      if (i == 2) master = n;
    }
    if (!master) continue;
    for (int64_t s = std::max<int64_t>(0, e[0].integer);
         s <= std::min<int64_t>(k_cluster_slots - 1, e[1].integer); ++s)
      slots[s] = master;
  }
  slots_ = std::move(slots);
  return std::nullopt;
}

// The node at HOST:PORT, reached like TEMPLATE (scheme, user, password, TLS).
NodeRedis* SlotMap::node_at(const std::string& host, int port, const RedisUrl& like,
                            const ConnectOptions& options) {
  std::string endpoint = host + ":" + std::to_string(port);
  auto& slot = nodes_[endpoint];
  if (!slot) {
    RedisUrl url = like;
    url.host = host;
    url.port = port;
    slot = std::make_unique<NodeRedis>(url, options);
  }
  return slot.get();
}

}  // namespace rlock
