// A server that may turn out to be a Redis Cluster. Until a MOVED reply says otherwise it is a
// plain server; from then on each command goes to the master of its key's hash slot, learned
// from CLUSTER SLOTS and corrected by every MOVED. ASK (a slot being migrated) is followed for
// the one command. Every key one lock touches shares the lock's slot (lock.h, helper_key), so a
// lock's script runs on one node, as Cluster requires.
#include "cluster.h"

#include <algorithm>
#include <charconv>
#include <map>

#include "redis_node.h"

namespace rlock {

std::optional<std::string_view> hash_tag(std::string_view key) {
  size_t open = key.find('{');
  if (open == std::string_view::npos) return std::nullopt;
  size_t close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) return std::nullopt;
  return key.substr(open + 1, close - open - 1);
}

int key_slot(std::string_view key) {
  if (auto tag = hash_tag(key)) key = *tag;
  uint16_t crc = 0;
  for (char c : key) {
    crc ^= static_cast<uint16_t>(static_cast<unsigned char>(c) << 8);
    for (int bit = 0; bit < 8; ++bit)
      crc = static_cast<uint16_t>(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
  }
  return crc % k_cluster_slots;
}

std::optional<std::string_view> command_key(const Argv& argv) {
  if (argv.empty()) return std::nullopt;
  const std::string& name = argv[0];
  if (name == "EVAL" || name == "EVALSHA") {
    if (argv.size() > 3 && argv[2] != "0") return argv[3];
    return std::nullopt;
  }
  for (const char* keyless : {"TIME", "SCAN", "WAIT", "INFO", "PING", "ROLE", "CLUSTER", "ASKING",
                              "AUTH", "SELECT", "SCRIPT", "SENTINEL", "DBSIZE"})
    if (name == keyless) return std::nullopt;
  if (argv.size() < 2) return std::nullopt;
  return argv[1];
}

std::optional<Redirect> parse_redirect(const std::string& error) {
  Redirect r;
  std::string_view rest;
  if (error.rfind("MOVED ", 0) == 0) {
    rest = std::string_view(error).substr(6);
  } else if (error.rfind("ASK ", 0) == 0) {
    r.ask = true;
    rest = std::string_view(error).substr(4);
  } else {
    return std::nullopt;
  }
  size_t space = rest.find(' ');
  size_t colon = rest.rfind(':');
  if (space == std::string_view::npos || colon == std::string_view::npos || colon < space)
    return std::nullopt;
  auto slot_text = rest.substr(0, space);
  auto port_text = rest.substr(colon + 1);
  if (std::from_chars(slot_text.data(), slot_text.data() + slot_text.size(), r.slot).ec !=
          std::errc() ||
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), r.port).ec !=
          std::errc())
    return std::nullopt;
  r.host = std::string(rest.substr(space + 1, colon - space - 1));
  if (r.host.size() > 2 && r.host.front() == '[') r.host = r.host.substr(1, r.host.size() - 2);
  if (r.slot < 0 || r.slot >= k_cluster_slots || r.port <= 0 || r.port > 65535) return std::nullopt;
  return r;
}

namespace {

// Redirects to follow for one command before giving up (a cluster in mid-reshard).
constexpr int k_max_redirects = 5;

class ClusterAwareRedis final : public Redis {
public:
  ClusterAwareRedis(const RedisUrl& url, const ConnectOptions& options)
      : seed_(node_at(url.host, url.port, url, options)) {}

  Result<std::vector<Reply>> pipeline(const std::vector<Argv>& commands,
                                      TimePoint deadline) override {
    // Units: a command with a key and the keyless ones after it (WAIT after a write, TIME
    // before reads), which must run where it runs.
    std::vector<Group> units;
    for (size_t i = 0; i < commands.size(); ++i) {
      if (units.empty() || command_key(commands[i]))
        units.push_back({i, i + 1, nullptr, false});
      else
        units.back().end = i + 1;
    }
    for (Group& u : units) u.node = route(commands[u.begin]);
    std::vector<Reply> replies(commands.size());
    std::vector<size_t> pending(units.size());
    for (size_t i = 0; i < units.size(); ++i) pending[i] = i;
    for (int round = 0; !pending.empty(); ++round) {
      if (round > k_max_redirects)
        return Failure{Failure::Kind::protocol, name() + ": too many MOVED/ASK redirects"};
      auto failed = run_units(commands, units, pending, replies, deadline);
      if (failed) return *failed;
      std::vector<size_t> again;
      for (size_t u : pending) {
        Group& unit = units[u];
        const Reply& first = replies[unit.begin];
        auto redirect = first.type == Reply::Type::error ? parse_redirect(first.str) : std::nullopt;
        if (!redirect) continue;
        NodeRedis* target = node_at(redirect->host, redirect->port, seed_->url(), seed_->options());
        if (!redirect->ask) learn(*redirect, target, deadline);
        unit.node = target;
        unit.asking = redirect->ask;
        again.push_back(u);
      }
      pending = std::move(again);
    }
    return replies;
  }

  Result<Reply> blocking_call(const Argv& argv, TimePoint deadline, int interrupt_fd) override {
    NodeRedis* node = route(argv);
    for (int round = 0; round <= k_max_redirects; ++round) {
      auto reply = node->blocking_call(argv, deadline, interrupt_fd);
      if (reply || reply.failure().kind != Failure::Kind::server) return reply;
      const std::string& code = reply.failure().code;
      if (code != "MOVED") return reply;
      // The failure's message is "name: MOVED ..."; ask the node for the slot map instead.
      if (!load_slots(*node, deadline)) return reply;
      node = route(argv);
    }
    return Failure{Failure::Kind::protocol, name() + ": too many MOVED redirects"};
  }

  std::string name() const override { return seed_->name(); }
  Millis command_timeout() const override { return seed_->command_timeout(); }

  // The master of KEY's slot as the slot map has it: learned from the first MOVED (a read of
  // the key before this finds it); until then, the seed, which then holds every key.
  Result<OwnConnection> own_connection(const std::string& key, TimePoint deadline) override {
    return route({"GET", key})->own_connection(key, deadline);
  }

  Result<Unit> for_each_primary(const std::function<Result<Unit>(Redis&)>& f,
                                TimePoint deadline) override {
    if (slots_.empty()) {
      auto info = seed_->call({"INFO", "cluster"}, deadline);
      if (!info) return info.failure();
      if (info->str.find("cluster_enabled:1") == std::string::npos) return f(*seed_);
      if (!load_slots(*seed_, deadline))
        return Failure{Failure::Kind::protocol, name() + ": cannot read the cluster's slots"};
    }
    std::vector<NodeRedis*> masters;
    for (NodeRedis* n : slots_)
      if (n && std::find(masters.begin(), masters.end(), n) == masters.end()) masters.push_back(n);
    for (NodeRedis* m : masters) {
      auto done = f(*m);
      if (!done) return done;
    }
    return Unit{};
  }

private:
  struct Group {
    size_t begin, end;  // commands [begin, end)
    NodeRedis* node;
    bool asking;  // send ASKING first (a slot in migration)
  };

  NodeRedis* route(const Argv& argv) {
    auto key = command_key(argv);
    if (!key || slots_.empty()) return seed_;
    NodeRedis* n = slots_[key_slot(*key)];
    return n ? n : seed_;
  }

  // Sends every pending unit to its node, one round trip for all nodes; fills REPLIES.
  std::optional<Failure> run_units(const std::vector<Argv>& commands, std::vector<Group>& units,
                                   const std::vector<size_t>& pending, std::vector<Reply>& replies,
                                   TimePoint deadline) {
    std::vector<NodeRedis*> nodes;
    std::vector<std::vector<Argv>> batches;
    std::vector<std::vector<std::pair<size_t, bool>>> where;  // per batch: command, is ASKING
    for (size_t u : pending) {
      const Group& unit = units[u];
      size_t b = std::find(nodes.begin(), nodes.end(), unit.node) - nodes.begin();
      if (b == nodes.size()) {
        nodes.push_back(unit.node);
        batches.emplace_back();
        where.emplace_back();
      }
      if (unit.asking) {
        batches[b].push_back({"ASKING"});
        where[b].push_back({0, true});
      }
      for (size_t i = unit.begin; i < unit.end; ++i) {
        batches[b].push_back(commands[i]);
        where[b].push_back({i, false});
      }
    }
    auto results = exchange(nodes, batches, deadline);
    for (size_t b = 0; b < nodes.size(); ++b) {
      if (!results[b]) return name_refused_command(*nodes[b], batches[b], results[b].failure());
      for (size_t k = 0; k < where[b].size(); ++k)
        if (!where[b][k].second) replies[where[b][k].first] = std::move((*results[b])[k]);
    }
    return std::nullopt;
  }

  // After MOVED: the whole map, which has likely changed for more than one slot.
  void learn(const Redirect& r, NodeRedis* target, TimePoint deadline) {
    if (!load_slots(*target, deadline)) {
      if (slots_.empty()) slots_.assign(k_cluster_slots, nullptr);
      slots_[r.slot] = target;
    }
  }

  bool load_slots(NodeRedis& from, TimePoint deadline) {
    auto reply = from.call({"CLUSTER", "SLOTS"}, deadline);
    if (!reply || !reply->is_array()) return false;
    std::vector<NodeRedis*> slots(k_cluster_slots, nullptr);
    for (const Reply& range : reply->elements) {
      const auto& e = range.elements;
      if (e.size() < 3 || !e[0].is_integer() || !e[1].is_integer() || !e[2].is_array() ||
          e[2].elements.size() < 2 || !e[2].elements[1].is_integer())
        continue;
      std::string host = e[2].elements[0].str;
      if (host.empty() || host == "?") host = from.url().host;  // "the address you asked"
      NodeRedis* master =
          node_at(host, static_cast<int>(e[2].elements[1].integer), seed_->url(), seed_->options());
      for (int64_t s = std::max<int64_t>(0, e[0].integer);
           s <= std::min<int64_t>(k_cluster_slots - 1, e[1].integer); ++s)
        slots[s] = master;
    }
    slots_ = std::move(slots);
    return true;
  }

  // The node at HOST:PORT, reached like TEMPLATE (scheme, user, password, TLS).
  NodeRedis* node_at(const std::string& host, int port, const RedisUrl& like,
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

  std::map<std::string, std::unique_ptr<NodeRedis>> nodes_;
  NodeRedis* seed_;
  std::vector<NodeRedis*> slots_;  // empty: not known to be a Cluster
};

}  // namespace

std::unique_ptr<Redis> make_single_redis(const RedisUrl& url, const ConnectOptions& options) {
  return std::make_unique<ClusterAwareRedis>(url, options);
}

}  // namespace rlock
