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

#include "redis/cluster_map.h"
#include "redis/exchange.h"
#include "redis/proxy.h"
#include "redis/redis_node.h"
#include "redis/retry.h"

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
  if (name == "EVAL" || name == "EVALSHA" || name == "EVAL_RO" || name == "EVALSHA_RO") {
    if (argv.size() > 3 && argv[2] != "0") return argv[3];
    return std::nullopt;
  }
  for (const char* keyless : {"TIME", "SCAN", "WAIT", "INFO", "PING", "ROLE", "CLUSTER", "ASKING",
                              "AUTH", "SELECT", "SCRIPT", "SENTINEL", "DBSIZE"})
    if (name == keyless) return std::nullopt;
  if (name == "XREAD") {  // XREAD [COUNT N] [BLOCK MS] STREAMS KEY ... ID ...
    for (size_t i = 1; i + 1 < argv.size(); ++i)
      if (argv[i] == "STREAMS") return argv[i + 1];
    return std::nullopt;
  }
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
  ClusterAwareRedis(const std::vector<RedisUrl>& seeds, const ConnectOptions& options)
      : map_(seeds, options) {}

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
    if (auto failure = map_.map_of_seeds(deadline)) return *failure;
    map_.read_map_if_stale(deadline);
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
          NodeRedis* target = map_.node_at(redirect->host, redirect->port);
          if (!redirect->ask) map_.learn(*redirect, target, deadline);
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
          if (unsent) return map_.explained(*unsent);
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
    if (auto failure = map_.map_of_seeds(deadline)) return *failure;
    map_.read_map_if_stale(deadline);
    NodeRedis* node = route(argv, nullptr);
    bool asking = false;
    for (int redirects = 0, again = 0;;) {
      auto reply = asking ? node->blocking_send({{"ASKING"}, argv}, deadline, interrupt_fd)
                          : node->blocking_send({argv}, deadline, interrupt_fd);
      if (!reply) {
        NodeRedis* elsewhere = follow_failure(node, argv, reply.failure(), deadline);
        if (!elsewhere) return map_.explained(reply.failure());
        node = elsewhere;
        asking = false;
        continue;
      }
      if (reply->type != Reply::Type::error) return reply;
      auto redirect = parse_redirect(reply->str);
      asking = false;
      if (redirect && redirects++ < k_max_redirects) {
        node = map_.node_at(redirect->host, redirect->port);
        if (!redirect->ask) map_.learn(*redirect, node, deadline);
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

  std::string name() const override { return map_.name(); }
  Millis command_timeout() const override { return map_.seed()->command_timeout(); }

  // The master of KEY's slot as the slot map has it: read before the first command with
  // several seeds, else learned from the first MOVED (a read of the key before this finds
  // it); until then, the seed, which then holds every key. In a Cluster, a connection of its
  // own fails where the map cannot see it: a command about KEY goes first, as any command
  // does, so that a master that is gone has the map read again (and its promoted replica
  // found), not asked for ever by a caller that tries again (watch subscribes again after a
  // failure). Sent again once at once when its connection was closed under it (a proxy's
  // idle timeout), as a read may be.
  Result<OwnConnection> own_connection(const std::string& key, TimePoint deadline) override {
    if (auto failure = map_.map_of_seeds(deadline)) return *failure;
    if (map_.known()) {
      auto answered = call({"EXISTS", key}, deadline);
      if (!answered && dropped(answered.failure())) answered = call({"EXISTS", key}, deadline);
      if (!answered) return answered.failure();
    }
    return route({"GET", key}, nullptr)->own_connection(key, deadline);
  }
  std::string server_of(const std::string& key) override {
    return route({"GET", key}, nullptr)->name();
  }
  bool can_fail_over() const override { return map_.known(); }

  Result<Unit> for_each_primary(const std::function<Result<Unit>(Redis&)>& f,
                                TimePoint deadline) override {
    if (!map_.known()) {
      auto seen = seed_is_cluster(deadline);
      // A seed that is down: the map from another one, which must be a Cluster node.
      bool cluster = seen && *seen;
      if (!seen && !(node_failed(seen.failure()) &&
                     map_.refresh_after_failure(map_.seed(), deadline, seen.failure())))
        return seen.failure();
      if (!seen) cluster = true;
      if (!cluster) return f(*this);
      if (!map_.known() && map_.read_map(*map_.seed(), deadline))
        return Failure{Failure::Kind::protocol, name() + ": cannot read the cluster's slots"};
    }
    for (NodeRedis* m : map_.masters()) {
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
    auto info = map_.seed()->call({"INFO", "cluster"}, deadline);
    if (info) return info->str.find("cluster_enabled:1") != std::string::npos;
    if (info.failure().kind != Failure::Kind::server) return info.failure();
    auto slots = map_.seed()->call({"CLUSTER", "SLOTS"}, deadline);
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
    if (!key) return keyless ? keyless : map_.seed();
    NodeRedis* n = map_.master_of(*key);
    return n ? n : map_.seed();
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
      if (!resent_elsewhere(nodes[b], failure, deadline)) return map_.explained(failure);
      for (size_t u : pending) {
        if (units[u].node != nodes[b]) continue;
        NodeRedis* elsewhere = route(commands[units[u].begin], keyless);
        if (elsewhere == nodes[b]) return map_.explained(failure);
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
    if (!node_failed(failure) || !map_.refresh_after_failure(node, deadline, failure)) return false;
    return failure.kind == Failure::Kind::connect && Clock::now() < deadline;
  }

  // The same for ARGV alone (a blocking call): the node to send it to now, or nothing.
  NodeRedis* follow_failure(NodeRedis* node, const Argv& argv, const Failure& failure,
                            TimePoint deadline) {
    if (!resent_elsewhere(node, failure, deadline)) return nullptr;
    NodeRedis* elsewhere = route(argv, nullptr);
    return elsewhere != node ? elsewhere : nullptr;
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

  SlotMap map_;
  std::map<NodeRedis*, std::unique_ptr<MasterView>> views_;  // for_each_primary's, per master
};

}  // namespace

std::unique_ptr<Redis> make_single_redis(const std::vector<RedisUrl>& seeds,
                                         const ConnectOptions& options) {
  return std::make_unique<ClusterAwareRedis>(seeds, options);
}

}  // namespace rlock
