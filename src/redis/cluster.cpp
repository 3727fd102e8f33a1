// A server that may turn out to be a Redis Cluster. Reached through one address, it is a plain
// server until a MOVED reply says otherwise; through several (one Cluster's seeds), the slot
// map is read before the first command. From then on each command goes to the master of its
// key's hash slot, learned from CLUSTER SLOTS and corrected by every MOVED. ASK (a slot being
// migrated) is followed for the one command. Every key one lock touches shares the lock's slot
// (lock.h, helper_key), so a lock's script runs on one node, as Cluster requires.
//
// Resharding is no outage: while a slot migrates, a lock's keys may be some on the source, some
// on the destination, and its scripts (several keys) are refused with TRYAGAIN until the last
// key has moved; a cluster that lost its quorum or a slot says CLUSTERDOWN, a restarted node
// LOADING. Each such command is sent again after a pause (refusal_pause()) until the caller's
// deadline: it was refused before it ran, so sending it again cannot run it twice.
//
// A master that dies answers nothing: no MOVED says where its slots went. A node that refuses
// a connection, drops it or does not answer makes rlock read the slot map again from the other
// nodes it knows (every master and replica of the last map, then the URL's seeds), at most once
// per k_map_refresh_interval; once the Cluster has promoted a replica the map names it, and a
// command that was never sent (the connection was refused) goes there at once. One that may
// have run (a reply lost with the connection) is the caller's to send again, as with one
// server; the map is new by then. docs/DESIGN.md "Cluster failover".
#include "redis/cluster.h"

#include <poll.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>

#include "redis/redis_node.h"
#include "util/log.h"

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

bool refused_for_now(std::string_view error) {
  std::string_view code = error.substr(0, error.find(' '));
  return code == "TRYAGAIN" || code == "CLUSTERDOWN" || code == "LOADING";
}

Millis refusal_pause(int again) {
  Millis pause = k_refusal_pause_first;
  for (int i = 0; i < again && pause < k_refusal_pause_cap; ++i) pause *= 2;
  return std::min(pause, k_refusal_pause_cap);
}

namespace {

// Redirects to follow at once for one command; past them, it is sent again after a pause, as
// a refused one is (a slot map that changes under us in mid-reshard).
constexpr int k_max_redirects = 5;

// How often a process may read the slot map again after connection failures: a dead master is
// noticed by every command sent to it, and a fleet of waiters must not turn that into a storm
// of CLUSTER SLOTS on the nodes that are left.
constexpr Millis k_map_refresh_interval{500};

// A node that failed us this recently is asked for the map after the others.
constexpr Millis k_failed_of_late{10000};

// The least time a node is given to answer for the map while time is left (first_map).
constexpr Millis k_least_share{250};

constexpr const char* k_no_cluster_node =
    "address of the URL, is no Cluster node: the addresses of one URL are the seeds of one "
    "Cluster, and Redlock's servers are given as several --redis";

// MESSAGE (a failure's, which names its server NAME) from after "NAME: ", without spaces at
// its end: "cannot connect to 10.0.0.5:6379: Connection refused" gives "Connection refused".
std::string without_name(const std::string& name, std::string_view message) {
  if (auto at = message.find(name + ": "); at != std::string_view::npos)
    message.remove_prefix(at + name.size() + 2);
  return std::string(message.substr(0, message.find_last_not_of(' ') + 1));
}

// Whether FAILURE says that a node, rather than rlock or its settings, failed: it refused the
// connection, dropped it, or did not answer. A refused TLS handshake or rlock's own shortage
// of descriptors is no reason to look for another node.
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

enum class Paused { over, no_time, interrupted };

// Sleeps until the pause before the AGAIN-th sending is over. No time: that would leave none
// before DEADLINE (what was refused stays the answer). Interrupted: INTERRUPT_FD (a blocking
// call's, when not -1) became readable first.
Paused pause_before_sending_again(int again, TimePoint deadline, int interrupt_fd = -1) {
  TimePoint next = Clock::now() + refusal_pause(again);
  if (next >= deadline) return Paused::no_time;
  pollfd p{interrupt_fd, POLLIN, 0};
  for (;;) {
    int n = ::poll(&p, interrupt_fd < 0 ? 0 : 1, millis_until(next));
    if (n > 0) return Paused::interrupted;
    if (n == 0 || errno != EINTR) return Paused::over;
  }
}

class ClusterAwareRedis final : public Redis {
public:
  // SEEDS: one URL's addresses (parse_redis_seeds), all of one Cluster when more than one.
  ClusterAwareRedis(const std::vector<RedisUrl>& seeds, const ConnectOptions& options) {
    for (const RedisUrl& url : seeds) seeds_.push_back(node_at(url.host, url.port, url, options));
    seed_ = seeds_.front();
    name_ = seed_->name();
    for (size_t i = 1; i < seeds_.size(); ++i) name_ += "," + seeds_[i]->url().endpoint();
  }

  Result<std::vector<Reply>> pipeline(const std::vector<Argv>& commands,
                                      TimePoint deadline) override {
    return send(commands, deadline, nullptr);
  }

  // pipeline(), with the commands that lead their unit without a key sent to KEYLESS (the
  // master a SCAN pages through: MasterView), or to the seed when it is null.
  Result<std::vector<Reply>> send(const std::vector<Argv>& commands, TimePoint deadline,
                                  NodeRedis* keyless) {
    // Units: a command with a key and the keyless ones after it (WAIT after a write, TIME
    // before reads), which must run where it runs.
    std::vector<Group> units;
    for (size_t i = 0; i < commands.size(); ++i) {
      if (units.empty() || command_key(commands[i]))
        units.push_back({i, i + 1, nullptr, false});
      else
        units.back().end = i + 1;
    }
    if (auto failure = map_of_seeds(deadline)) return *failure;
    read_map_if_stale(deadline);
    for (Group& u : units) u.node = route(commands[u.begin], keyless);
    std::vector<Reply> replies(commands.size());
    std::vector<size_t> pending(units.size());
    for (size_t i = 0; i < units.size(); ++i) pending[i] = i;
    int redirects = 0;  // followed at once, since the last pause
    for (int again = 0; !pending.empty();) {
      std::vector<size_t> resend;
      std::optional<Failure> unsent;  // why units in RESEND were not sent (no reply of theirs)
      auto failed = run_units(commands, units, pending, replies, deadline, keyless, resend, unsent);
      if (failed) return *failed;
      bool pause = false;  // a refusal, or redirects that go on and on
      for (size_t u : pending) {
        Group& unit = units[u];
        if (std::find(resend.begin(), resend.end(), u) != resend.end()) continue;
        const Reply& first = replies[unit.begin];
        if (first.type != Reply::Type::error) continue;
        if (auto redirect = parse_redirect(first.str)) {
          NodeRedis* target =
              node_at(redirect->host, redirect->port, seed_->url(), seed_->options());
          if (!redirect->ask) learn(*redirect, target, deadline);
          unit.node = target;
          unit.asking = redirect->ask;
          if (redirects >= k_max_redirects) pause = true;
          resend.push_back(u);
        } else if (refused_for_now(first.str)) {
          pause = true;
          resend.push_back(u);
        }
      }
      if (resend.empty()) break;
      if (pause) {
        if (pause_before_sending_again(again, deadline) == Paused::no_time) {
          if (unsent) return explained(*unsent);
          if (redirects >= k_max_redirects)
            return Failure{Failure::Kind::protocol, name() + ": too many MOVED/ASK redirects"};
          // Refused until the deadline: the caller sees the refusal, and that it lasted.
          for (size_t u : resend)
            if (again > 0 && refused_for_now(replies[units[u].begin].str))
              replies[units[u].begin].str += " (retried within the command timeout)";
          break;
        }
        ++again;
        // An ASK holds for one sending: after a pause, each goes where the slot map says.
        for (size_t u : resend) {
          units[u].node = route(commands[units[u].begin], keyless);
          units[u].asking = false;
        }
        redirects = 0;
      } else {
        ++redirects;
      }
      pending = std::move(resend);
    }
    return replies;
  }

  Result<Reply> blocking_call(const Argv& argv, TimePoint deadline, int interrupt_fd) override {
    if (auto failure = map_of_seeds(deadline)) return *failure;
    read_map_if_stale(deadline);
    NodeRedis* node = route(argv, nullptr);
    bool asking = false;
    for (int redirects = 0, again = 0;;) {
      auto reply = asking ? node->blocking_send({{"ASKING"}, argv}, deadline, interrupt_fd)
                          : node->blocking_send({argv}, deadline, interrupt_fd);
      if (!reply) {
        NodeRedis* elsewhere = follow_failure(node, argv, reply.failure(), deadline);
        if (!elsewhere) return explained(reply.failure());
        node = elsewhere;
        asking = false;
        continue;
      }
      if (reply->type != Reply::Type::error) return reply;
      auto redirect = parse_redirect(reply->str);
      asking = false;
      if (redirect && redirects++ < k_max_redirects) {
        node = node_at(redirect->host, redirect->port, seed_->url(), seed_->options());
        if (!redirect->ask) learn(*redirect, node, deadline);
        asking = redirect->ask;
      } else if (redirect || refused_for_now(reply->str)) {
        Paused paused = pause_before_sending_again(again++, deadline, interrupt_fd);
        if (paused == Paused::no_time) return node->server_failure(reply->str);
        if (paused == Paused::interrupted)
          return Failure{Failure::Kind::interrupted, node->name() + ": interrupted"};
        node = route(argv, nullptr);
        redirects = 0;
      } else {
        return node->server_failure(reply->str);
      }
    }
  }

  std::string name() const override { return name_; }
  Millis command_timeout() const override { return seed_->command_timeout(); }

  // The master of KEY's slot as the slot map has it: read before the first command with
  // several seeds, else learned from the first MOVED (a read of the key before this finds
  // it); until then, the seed, which then holds every key.
  Result<OwnConnection> own_connection(const std::string& key, TimePoint deadline) override {
    if (auto failure = map_of_seeds(deadline)) return *failure;
    return route({"GET", key}, nullptr)->own_connection(key, deadline);
  }

  Result<Unit> for_each_primary(const std::function<Result<Unit>(Redis&)>& f,
                                TimePoint deadline) override {
    if (slots_.empty()) {
      auto cluster = seed_is_cluster(deadline);
      // A seed that is down: the map from another one, which must be a Cluster node.
      if (!cluster && node_failed(cluster.failure()) &&
          refresh_after_failure(seed_, deadline, cluster.failure()))
        cluster = true;
      if (!cluster) return cluster.failure();
      if (!*cluster) return f(*this);
      if (slots_.empty() && read_map(*seed_, deadline))
        return Failure{Failure::Kind::protocol, name() + ": cannot read the cluster's slots"};
    }
    std::vector<NodeRedis*> masters;
    for (NodeRedis* n : slots_)
      if (n && std::find(masters.begin(), masters.end(), n) == masters.end()) masters.push_back(n);
    for (NodeRedis* m : masters) {
      // Kept as long as this Redis: callers may hold on to the Redis& they were given
      // (list reads its batches after the scan, find_locks' FoundLocks::servers).
      auto& view = views_[m];
      if (!view) view = std::make_unique<MasterView>(*this, *m);
      auto done = f(*view);
      if (!done) return done;
    }
    return Unit{};
  }

private:
  // Whether the seed is a Cluster node, for a command on every master (list's SCAN), before
  // any MOVED has said so: INFO cluster tells. A server may refuse INFO (renamed away, as
  // managed services disable commands, or an ACL): then CLUSTER SLOTS does, as a Cluster's
  // clients all need it; a server that refuses CLUSTER too is a single one, unless it refuses
  // by ACL (NOPERM), which a Cluster may do as well: that is said, not guessed.
  Result<bool> seed_is_cluster(TimePoint deadline) {
    auto info = seed_->call({"INFO", "cluster"}, deadline);
    if (info) return info->str.find("cluster_enabled:1") != std::string::npos;
    if (info.failure().kind != Failure::Kind::server) return info.failure();
    auto slots = seed_->call({"CLUSTER", "SLOTS"}, deadline);
    if (slots) return true;
    const Failure& refused = slots.failure();
    if (refused.kind != Failure::Kind::server) return refused;
    if (refused.message.find("cluster support disabled") != std::string::npos ||
        refused.message.find("unknown command") != std::string::npos)
      return false;
    auto reply = [&](const Failure& failure) { return without_name(name(), failure.message); };
    return Failure{Failure::Kind::server,
                   name() + ": list needs INFO or CLUSTER SLOTS to tell a Cluster from a single " +
                       "server, and both were refused (" + reply(info.failure()) + "; " +
                       reply(refused) + ")",
                   refused.code};
  }

  struct Group {
    size_t begin, end;  // commands [begin, end)
    NodeRedis* node;
    bool asking;  // send ASKING first (a slot in migration)
  };

  // Where ARGV goes: the master of its key's slot; a command without a key to KEYLESS (the
  // seed when null); any command before the first MOVED, and a key of a slot no master
  // serves, to the seed.
  NodeRedis* route(const Argv& argv, NodeRedis* keyless) {
    auto key = command_key(argv);
    if (!key) return keyless ? keyless : seed_;
    if (slots_.empty()) return seed_;
    NodeRedis* n = slots_[key_slot(*key)];
    return n ? n : seed_;
  }

  // Sends every pending unit to its node, one round trip for all nodes; fills REPLIES. A node
  // that failed before anything reached it (a refused connection) while the map, read again,
  // now names another for its units: those units are re-routed and added to RESEND, with the
  // failure in UNSENT, the replies of the other nodes kept. Any other failure is returned, the map
  // read again first when a node failed, for the caller's next try.
  std::optional<Failure> run_units(const std::vector<Argv>& commands, std::vector<Group>& units,
                                   const std::vector<size_t>& pending, std::vector<Reply>& replies,
                                   TimePoint deadline, NodeRedis* keyless,
                                   std::vector<size_t>& resend, std::optional<Failure>& unsent) {
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
      if (results[b]) {
        for (size_t k = 0; k < where[b].size(); ++k)
          if (!where[b][k].second) replies[where[b][k].first] = std::move((*results[b])[k]);
        continue;
      }
      Failure failure = name_refused_command(*nodes[b], batches[b], results[b].failure());
      if (!resent_elsewhere(nodes[b], failure, deadline)) return explained(failure);
      for (size_t u : pending) {
        if (units[u].node != nodes[b]) continue;
        NodeRedis* elsewhere = route(commands[units[u].begin], keyless);
        if (elsewhere == nodes[b]) return explained(failure);
        units[u].node = elsewhere;
        units[u].asking = false;
        resend.push_back(u);
        unsent = failure;
      }
    }
    return std::nullopt;
  }

  // After FAILURE at NODE: whether what failed there may go where the map, read again now,
  // says: NODE failed (not rlock, nor its settings), nothing of it was sent (a refused
  // connection: what may have run is the caller's to send again), and time is left.
  bool resent_elsewhere(NodeRedis* node, const Failure& failure, TimePoint deadline) {
    if (!node_failed(failure) || !refresh_after_failure(node, deadline, failure)) return false;
    return failure.kind == Failure::Kind::connect && Clock::now() < deadline;
  }

  // The same for ARGV alone (a blocking call): the node to send it to now, or nothing.
  NodeRedis* follow_failure(NodeRedis* node, const Argv& argv, const Failure& failure,
                            TimePoint deadline) {
    if (!resent_elsewhere(node, failure, deadline)) return nullptr;
    NodeRedis* elsewhere = route(argv, nullptr);
    return elsewhere != node ? elsewhere : nullptr;
  }

  // FAILURE, with why no other node stood in: those asked for the map in vain, and an address
  // of the URL that is a single server.
  Failure explained(Failure failure) const {
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
  std::optional<Failure> map_of_seeds(TimePoint deadline) {
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
  bool refresh_after_failure(NodeRedis* failed, TimePoint deadline, const Failure& failure) {
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
  NodeRedis* first_map(std::vector<NodeRedis*> candidates, TimePoint deadline,
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
  void read_map_if_stale(TimePoint deadline) {
    if (!stale_) return;
    StaleMap stale = *stale_;  // a copy: the refresh replaces or clears stale_
    refresh_after_failure(stale.node, deadline, stale.failure);
  }

  // After MOVED: the whole map, which has likely changed for more than one slot. The slot
  // itself goes to TARGET also when TARGET's map has it unassigned (a slot taken away from a
  // node and given back, a migration's last step): else its commands would go to the seed,
  // which sends them back to TARGET.
  void learn(const Redirect& r, NodeRedis* target, TimePoint deadline) {
    bool loaded = !read_map(*target, deadline);
    if (slots_.empty()) slots_.assign(k_cluster_slots, nullptr);
    if (!loaded || !slots_[r.slot]) slots_[r.slot] = target;
  }

  // CLUSTER SLOTS of FROM into the map, every node it names (replicas too) known from then on.
  // Why FROM gave no map, or nothing; one that has cluster support disabled is a single
  // server, named in the failures that follow (stray_).
  std::optional<Failure> read_map(NodeRedis& from, TimePoint deadline) {
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

  // One master as a SCAN sees it (for_each_primary): SCAN, which has no key, pages through
  // that master, and the keys it finds are read where their slot is now, refusals and
  // redirects handled as for every command (in a reshard, a key may have moved since).
  class MasterView final : public Redis {
  public:
    MasterView(ClusterAwareRedis& cluster, NodeRedis& master)
        : cluster_(cluster), master_(master) {}
    Result<std::vector<Reply>> pipeline(const std::vector<Argv>& commands,
                                        TimePoint deadline) override {
      return cluster_.send(commands, deadline, &master_);
    }
    Result<Reply> blocking_call(const Argv& argv, TimePoint deadline, int interrupt_fd) override {
      return cluster_.blocking_call(argv, deadline, interrupt_fd);
    }
    std::string name() const override { return master_.name(); }
    Millis command_timeout() const override { return master_.command_timeout(); }

  private:
    ClusterAwareRedis& cluster_;
    NodeRedis& master_;
  };

  std::map<std::string, std::unique_ptr<NodeRedis>> nodes_;
  std::map<NodeRedis*, std::unique_ptr<MasterView>> views_;  // for_each_primary's, per master
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

}  // namespace

std::unique_ptr<Redis> make_single_redis(const std::vector<RedisUrl>& seeds,
                                         const ConnectOptions& options) {
  return std::make_unique<ClusterAwareRedis>(seeds, options);
}

}  // namespace rlock
