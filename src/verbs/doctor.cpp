// rlock doctor [KEY]: is this Redis set up for locks? Reads what each server, and each
// sentinel, says of itself, and judges it for a lock: persistence, eviction, keyspace
// notifications, the version and the commands the ACL user may run, the clock, proxies, TLS
// certificates, replicas and --min-replicas, and the topology's failover window against the
// ttl (docs/DESIGN.md "Failover windows"). One line per finding; it changes nothing.
#include <algorithm>
#include <charconv>
#include <ctime>
#include <map>

#include "lock/lease.h"
#include "lock/lock.h"
#include "lock/lock_watch.h"
#include "lock/needs.h"
#include "print/print.h"
#include "redis/redis.h"
#include "redis/redis_node.h"
#include "redis/redlock.h"
#include "redis/sentinel.h"
#include "redis/server_survey.h"
#include "util/byte_size.h"
#include "util/duration.h"
#include "verbs/command.h"
#include "verbs/verbs.h"

namespace rlock {

namespace {

using Level = Finding::Level;

// The parts of a failover window that no setting names, measured with margin (docs/DESIGN.md
// "Failover windows"). Sentinel: the vote after down-after-milliseconds, and the switch, until
// the sentinels agree on the new primary and a replica acknowledges to it. Cluster: a
// replica's election, after cluster-node-timeout has made its master fail and the failure's
// news has spread (another cluster-node-timeout at most).
constexpr Millis k_sentinel_switch{3000};
constexpr Millis k_sentinel_vote{1000};
// Sentinel, when renewals wait for the old primary: the sentinels make it a replica 8 s after
// it last said it was a primary (4 of their 2 s publish periods), and 2 s for its full resync
// (besides the diskless delay) and margin.
constexpr Millis k_sentinel_demote{10000};
constexpr Millis k_cluster_election{1000};
// A server lost with its host (not a process killed, whose host refuses at once) may hold the
// renewal attempt sent to it for its timeout (renew_attempt_timeout, at most 2 s) first.
constexpr Millis k_vanished_host{2000};
// Redis's defaults, assumed where CONFIG GET is denied (and said).
constexpr Millis k_default_diskless_delay{5000};
constexpr Millis k_default_node_timeout{15000};
// Settings beyond this are taken as this: the window is said, the ttl computed stays finite.
constexpr Millis k_longest_window{24LL * 3600 * 1000};
// A clock further off than this (and than the round trip) is said.
constexpr Millis k_clock_note{1000};
// A certificate that ends within this is a problem now.
constexpr int k_certificate_days = 21;

std::string quoted(const std::string& text) { return "\"" + printable(text) + "\""; }

// "1 replica", "2 replicas".
std::string counted(size_t n, const std::string& thing) {
  return std::to_string(n) + " " + thing + (n == 1 ? "" : "s");
}

// A server the topology is made of.
struct Server {
  RedisUrl url;
  std::string role;  // "server", "primary", "replica", "master", "node"
  ServerSurvey survey;
};

class Doctor {
public:
  Doctor(const GlobalOptions& global, const RunOptions& run, std::string key,
         std::optional<Millis> kill_after)
      : global_(global), run_(run), key_(std::move(key)), kill_after_(kill_after) {}

  int examine(bool json) {
    std::vector<std::string> texts = global_.redis_urls;
    if (texts.empty()) texts.push_back(k_default_redis_url);
    std::string topology;
    bool reached = false;
    if (texts.size() == 1 && is_sentinel_url(texts.front()))
      reached = sentinel(parse_sentinel_url(texts.front()), topology);
    else if (texts.size() == 1)
      reached = single_or_cluster(parse_redis_seeds(texts.front()), topology);
    else
      reached = redlock(texts, topology);
    print_findings(topology, findings_, output_style(json));
    if (!reached) return k_exit_unavailable;
    for (const Finding& f : findings_)
      if (f.level == Level::problem) return k_exit_not_held;
    return k_exit_ok;
  }

private:
  TimePoint deadline() const {
    return Clock::now() + global_.connect.connect_timeout + global_.connect.command_timeout;
  }
  void add(Level level, std::string topic, std::string server, std::string text) {
    findings_.push_back({level, std::move(topic), std::move(server), std::move(text)});
  }

  // The server at URL, named in the findings with its ROLE in the topology.
  Server ask(const RedisUrl& url, std::string role) {
    NodeRedis node(url, global_.connect);
    Server s{url, role, survey_server(node, deadline())};
    if (role != "server") s.survey.name += " (" + role + ")";
    return s;
  }

  // --- One server's own settings -------------------------------------------------------------

  void judge(const Server& s) {
    const ServerSurvey& v = s.survey;
    if (v.unreachable) {
      add(Level::problem, "reach", v.name, "no answer: " + v.unreachable->message);
      return;
    }
    version(v);
    persistence(v);
    eviction(v);
    if (s.role != "replica") notifications(v);
    clock(v);
    proxy(s);
    certificate(v);
  }

  void version(const ServerSurvey& v) {
    if (!v.info_refused.empty()) {
      add(Level::unknown, "version", v.name, "INFO is refused (" + printable(v.info_refused) + ")");
      return;
    }
    bool valkey = v.field("server_name") == "valkey";
    std::string number = valkey ? v.field("valkey_version") : v.field("redis_version");
    std::string name = std::string(valkey ? "Valkey " : "Redis ") + printable(number);
    auto major = whole_number(number.substr(0, number.find('.')));
    if (!valkey && major && *major < 6)
      add(Level::problem, "version", v.name,
          name + ": rlock needs Redis 6.0 or later (list, ACL users and TLS fail before it)");
    else
      add(Level::ok, "version", v.name, name);
  }

  void persistence(const ServerSurvey& v) {
    std::string aof = v.field("aof_enabled");
    auto fsync = v.config.find("appendfsync");
    auto save = v.config.find("save");
    if (aof.empty() && v.config.find("appendonly") == v.config.end()) {
      add(Level::unknown, "persistence", v.name,
          "neither INFO nor CONFIG GET answered (" + printable(v.info_refused) + ")");
      return;
    }
    bool on = aof == "1" || (aof.empty() && v.config.at("appendonly") == "yes");
    if (on) {
      if (fsync == v.config.end())
        add(Level::ok, "persistence", v.name, "AOF (appendfsync unknown: CONFIG GET is refused)");
      else if (fsync->second == "no")
        add(Level::note, "persistence", v.name,
            "AOF with appendfsync no: a crash of the host loses up to 30 s of writes, locks "
            "taken and pauses set among them; appendfsync everysec loses at most 1 s");
      else
        add(Level::ok, "persistence", v.name,
            "AOF, appendfsync " + printable(fsync->second) +
                (fsync->second == "always" ? "" : ": a crash loses at most 1 s of writes"));
      return;
    }
    bool none = save != v.config.end() && save->second.empty();
    std::string what = save == v.config.end() ? "no AOF (appendonly no; RDB snapshots unknown: "
                                                "CONFIG GET is refused)"
                       : save->second.empty() ? "none (appendonly no, save \"\")"
                                              : "RDB snapshots only (appendonly no, save " +
                                                    quoted(save->second) + ")";
    add(Level::problem, "persistence", v.name,
        what +
            (none ? ": a restart forgets every lock, pause and fence counter"
                  : ": a restart forgets the locks taken and pauses set since the last "
                    "snapshot") +
            ", so a job can run twice; set appendonly yes (appendfsync everysec)");
  }

  void eviction(const ServerSurvey& v) {
    std::string policy = v.field("maxmemory_policy");
    std::string limit = v.field("maxmemory");
    if (policy.empty()) {
      auto p = v.config.find("maxmemory-policy");
      auto m = v.config.find("maxmemory");
      if (p == v.config.end() || m == v.config.end()) {
        add(Level::unknown, "eviction", v.name, "neither INFO nor CONFIG GET answered");
        return;
      }
      policy = p->second;
      limit = m->second;
    }
    if (policy == "noeviction") {
      add(Level::ok, "eviction", v.name, "maxmemory-policy noeviction");
      return;
    }
    uint64_t bytes = static_cast<uint64_t>(whole_number(limit).value_or(0));
    if (bytes > 0)
      add(Level::problem, "eviction", v.name,
          "maxmemory-policy " + printable(policy) + " with maxmemory " + format_byte_size(bytes) +
              ": under memory pressure Redis may evict a lock's key while its job runs, and "
              "another host takes the lock; set maxmemory-policy noeviction");
    else
      add(Level::note, "eviction", v.name,
          "maxmemory-policy " + printable(policy) +
              " does nothing while maxmemory is 0, but evicts lock keys once a limit is set; "
              "set maxmemory-policy noeviction");
  }

  void notifications(const ServerSurvey& v) {
    auto it = v.config.find("notify-keyspace-events");
    if (it == v.config.end()) {
      add(Level::unknown, "notifications", v.name,
          "notify-keyspace-events: CONFIG GET is refused (" + printable(v.config_refused) +
              "); rlock watch polls every " + format_duration(k_watch_poll_interval));
      return;
    }
    std::string missing = missing_classes(it->second);
    if (missing.empty())
      add(Level::ok, "notifications", v.name,
          "notify-keyspace-events " + quoted(it->second) + ": rlock watch is told of each change");
    else
      add(Level::note, "notifications", v.name,
          "notify-keyspace-events " + quoted(it->second) + " lacks " + missing +
              ": rlock watch polls every " + format_duration(k_watch_poll_interval) +
              " instead (runs and waiters do not need it); set notify-keyspace-events " +
              quoted(it->second + missing));
  }

  void clock(const ServerSurvey& v) {
    if (!v.clock_ahead) return;
    Millis ahead = *v.clock_ahead;
    Millis off = ahead < Millis(0) ? -ahead : ahead;
    // Half the round trip is how far off the reading may be; said when it is not negligible.
    std::string within = v.round_trip / 2 < Millis(5)
                             ? ""
                             : " (give or take " + format_duration(v.round_trip / 2) + ")";
    if (off > std::max(k_clock_note, v.round_trip))
      add(Level::note, "clock", v.name,
          "the server's clock is " + format_duration(off) +
              (ahead > Millis(0) ? " ahead of" : " behind") + " this host's" + within +
              ": leases do not depend on it, but the times rlock reads from Redis (history, "
              "status) differ by as much from this host's logs; run NTP on both");
    else
      add(Level::ok, "clock", v.name,
          "the server's clock is within " + format_duration(std::max(off, Millis(1))) +
              " of this host's" + within);
  }

  void proxy(const Server& s) {
    const ServerSurvey& v = s.survey;
    if (auto t = v.config.find("timeout");
        t != v.config.end() && whole_number(t->second).value_or(0) > 0)
      add(Level::note, "idle-timeout", v.name,
          "timeout " + printable(t->second) +
              ": the server closes connections idle that many seconds; rlock connects again "
              "without a word");
    if (s.url.scheme == RedisUrl::Scheme::unix_socket || v.local_address.empty()) return;
    size_t colon = v.local_address.rfind(':');
    std::string port = colon == std::string::npos ? "" : v.local_address.substr(colon + 1);
    if (port != std::to_string(s.url.port))
      add(Level::note, "proxy", v.name,
          "the server sees this connection arrive at " + printable(v.local_address) + ", not " +
              printable(s.url.endpoint()) +
              ": a proxy or NAT is between; rlock rides out a proxy's idle cuts, and names a "
              "command a proxy does not pass");
  }

  void certificate(const ServerSurvey& v) {
    if (!v.certificate_expires) return;
    int64_t now = static_cast<int64_t>(::time(nullptr));
    int64_t days = (*v.certificate_expires - now) / 86400;
    std::time_t t = static_cast<std::time_t>(*v.certificate_expires);
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char date[32];
    std::strftime(date, sizeof date, "%Y-%m-%d", &tm);
    if (days < k_certificate_days)
      add(Level::problem, "tls", v.name,
          std::string("the server's certificate expires on ") + date + " (in " +
              counted(static_cast<size_t>(std::max<int64_t>(days, 0)), "day") +
              "): every connection fails after that; renew it");
    else
      add(Level::ok, "tls", v.name,
          std::string("the server's certificate is valid until ") + date + " (" +
              counted(static_cast<size_t>(days), "day") + ")");
  }

  // --- What the ACL user may run ---------------------------------------------------------------

  void commands(Redis& redis, const std::string& server) {
    auto check = check_commands(redis, key_, run_.min_replicas > 0, deadline());
    if (!check) {
      // Behind Sentinel, ROLE goes first: a denial of it stops every command.
      bool denied = is_acl_denial(check.failure().message);
      add(denied ? Level::problem : Level::unknown, "commands", server,
          (denied ? "" : "could not try them: ") + check.failure().message);
      return;
    }
    // Each kind of denial on a line, its commands grouped by what needs them.
    std::map<std::string, std::string> needed, optional, keys, output;
    for (const Denial& d : check->denied) {
      auto& group = d.on == Denial::On::lock_keys     ? keys
                    : d.on == Denial::On::output_keys ? output
                    : d.optional                      ? optional
                                                      : needed;
      std::string& names = group[d.needed_by];
      names += (names.empty() ? "" : ", ") + d.command;
    }
    auto listed = [](const std::map<std::string, std::string>& group) {
      std::string text;
      for (const auto& [needed_by, names] : group)
        text += (text.empty() ? "" : "; ") + names + " (" + needed_by + ")";
      return text;
    };
    std::string lock = printable_key(key_);
    if (!needed.empty())
      add(Level::problem, "commands", server,
          "the ACL user may not run " + listed(needed) +
              "; rlock-redis(7) \"Least privilege\" has the ACL lines rlock needs");
    if (!keys.empty())
      add(Level::problem, "commands", server,
          "the ACL user's key patterns leave out " + lock + "'s own keys (" +
              printable(helper_key(key_, "...")) + "): " + listed(keys));
    if (!optional.empty())
      add(Level::note, "commands", server,
          "the ACL user may not run " + listed(optional) + ": those alone fail");
    if (!output.empty())
      add(Level::note, "commands", server,
          "the ACL user may not use " + lock + "'s kept output (" +
              printable(kept_output_key(key_, "...")) + "): " + listed(output) +
              "; meant so for an on-call user kept from the jobs' output");
    for (const std::string& what : check->unchecked)
      add(Level::unknown, "commands", server, "not tried: " + what);
    if (check->denied.empty() && check->unchecked.empty())
      add(Level::ok, "commands", server,
          "the ACL user may run every command rlock needs, on " + lock + "'s keys");
  }

  // --- Replicas and failover -------------------------------------------------------------------

  void replicas(size_t count, const std::string& where) {
    std::string n = std::to_string(run_.min_replicas);
    if (static_cast<size_t>(run_.min_replicas) > count)
      add(Level::problem, "replicas", where,
          "--min-replicas " + n + " but " + counted(count, "replica") +
              " answer: every acquisition fails (69); lower --min-replicas or add "
              "replicas");
    else if (count > 0 && run_.min_replicas == 0)
      add(Level::note, "replicas", where,
          counted(count, "replica") +
              ", --min-replicas 0: a failover to one may lose a lock taken just "
              "before it; --min-replicas 1 waits until a replica has it");
    else
      add(Level::ok, "replicas", where, counted(count, "replica") + ", --min-replicas " + n);
  }

  // The failover window WINDOW (WHAT it is made of) against the ttl: the outage a holder rides.
  void failover(Millis window, const std::string& what) {
    Millis ridden = outage_ridden(run_.ttl, run_.kill_after);
    std::string text = what + "; --ttl " + format_duration(run_.ttl) +
                       " rides through an outage of " + format_duration(ridden) + " at most";
    if (ridden >= window) {
      add(Level::ok, "failover", "", text);
      return;
    }
    add(Level::problem, "failover", "",
        text + ": a failover stops the holder's job (76); use --ttl " +
            format_duration(smallest_ttl_riding(window, kill_after_)) +
            " or more (docs/DESIGN.md \"Failover windows\")");
  }

  // --- Topologies ------------------------------------------------------------------------------

  bool single_or_cluster(const std::vector<RedisUrl>& seeds, std::string& topology) {
    Server first;
    for (const RedisUrl& seed : seeds) {
      first = ask(seed, "server");
      if (!first.survey.unreachable) break;
    }
    // INFO tells a Cluster; where an ACL refuses INFO (docs/REDIS.md "Least privilege" gives it on
    // a line of its own), CLUSTER SLOTS does, as `list` does.
    std::optional<std::vector<ClusterShard>> shards;
    if (!first.survey.unreachable &&
        (first.survey.field("cluster_enabled") == "1" || !first.survey.info_refused.empty())) {
      NodeRedis node(first.url, global_.connect);
      auto read = cluster_shards(node, deadline());
      if (read && !read->empty())
        shards = std::move(*read);
      else if (first.survey.field("cluster_enabled") == "1")
        add(Level::unknown, "replicas", first.survey.name,
            "CLUSTER SLOTS: " + (read ? std::string("no slot served") : read.failure().message));
      else if (!read && is_acl_denial(read.failure().message))
        add(Level::unknown, "topology", first.survey.name,
            "INFO and CLUSTER SLOTS are refused: whether this is a Cluster is not known, and it "
            "is judged as a single server");
    }
    if (shards) return cluster(first, *shards, topology);
    topology = "a single server, " + first.survey.name;
    judge(first);
    if (first.survey.unreachable) return false;
    auto redis = connect_redis(global_);
    commands(*redis, first.survey.name);
    if (auto count = whole_number(first.survey.field("connected_slaves")))
      replicas(static_cast<size_t>(*count), "");
    else
      add(Level::unknown, "replicas", "", "INFO is refused: the replicas are not counted");
    add(Level::ok, "failover", "",
        "a single server has no failover; --ttl " + format_duration(run_.ttl) +
            " rides through an outage (a restart) of " +
            format_duration(outage_ridden(run_.ttl, run_.kill_after)) + " at most");
    return true;
  }

  bool cluster(const Server& seed, const std::vector<ClusterShard>& shards, std::string& topology) {
    size_t fewest = SIZE_MAX, replica_count = 0;
    Millis node_timeout{0};
    bool timeout_known = true;
    std::vector<Server> servers;
    for (const ClusterShard& shard : shards) {
      Server master = ask(at_address(seed.url, shard.host, shard.port), "master");
      fewest = std::min(fewest, shard.replicas.size());
      if (shard.replicas.empty())
        add(Level::problem, "replicas", master.survey.name,
            "a master without a replica: its hash slots, and the locks in them, are down with "
            "it, and nothing takes over");
      auto t = master.survey.config.find("cluster-node-timeout");
      if (t == master.survey.config.end())
        timeout_known = false;
      else
        node_timeout = std::max(node_timeout, Millis(whole_number(t->second).value_or(0)));
      servers.push_back(std::move(master));
      for (const auto& [host, port] : shard.replicas) {
        servers.push_back(ask(at_address(seed.url, host, port), "replica"));
        ++replica_count;
      }
    }
    topology = "a Cluster of " + counted(shards.size(), "master") + " and " +
               counted(replica_count, "replica") + ", through " + seed.survey.name;
    for (const Server& s : servers) judge(s);
    auto redis = connect_redis(global_);
    commands(*redis, "");
    // Each master without a replica is said above; the count matters against --min-replicas.
    if (fewest == SIZE_MAX) fewest = 0;
    if (fewest > 0 || run_.min_replicas > 0) replicas(fewest, "");
    if (!timeout_known) node_timeout = std::max(node_timeout, k_default_node_timeout);
    node_timeout = std::min(node_timeout, k_longest_window);
    Millis window = 2 * node_timeout + k_cluster_election + k_vanished_host;
    failover(window, "a failover takes about " + format_duration(window) +
                         " (twice cluster-node-timeout, " + format_duration(node_timeout) +
                         (timeout_known ? "" : " as assumed where CONFIG GET is refused") +
                         ", a replica's election, and a renewal held by a host gone)");
    return true;
  }

  bool sentinel(const SentinelUrl& url, std::string& topology) {
    topology = "Sentinel " + url.redacted;
    std::optional<SentinelView> view = ask_sentinels(url);
    if (!view) return false;
    RedisUrl base = url.sentinels.front();
    base.scheme = url.tls ? RedisUrl::Scheme::tls : RedisUrl::Scheme::tcp;
    base.db = url.db;
    Server primary = ask_at(base, view->master, "primary");
    topology += ": primary " + primary.url.redacted();
    judge(primary);
    std::vector<Server> in_sync;
    for (const Fields& r : view->replicas) {
      std::string flags = field_of(r, "flags");
      if (flags.find("s_down") != std::string::npos ||
          flags.find("disconnected") != std::string::npos ||
          field_of(r, "master-link-status") != "ok") {
        add(Level::note, "replicas", "",
            "replica " + printable(field_of(r, "ip")) + ":" + printable(field_of(r, "port")) +
                " is not in sync (flags " + printable(flags) + "): a failover cannot choose it");
        continue;
      }
      in_sync.push_back(ask_at(base, r, "replica"));
      judge(in_sync.back());
    }
    if (primary.survey.unreachable) return false;
    auto redis = connect_redis(global_);
    commands(*redis, primary.survey.name);
    sentinel_failover(view->master, in_sync);
    return true;
  }

  // Every sentinel of URL at once: the first one's view of the primary, having said which
  // did not answer and whether enough did; nothing when none did.
  std::optional<SentinelView> ask_sentinels(const SentinelUrl& url) {
    std::optional<SentinelView> first;
    size_t answered = 0;
    for (const RedisUrl& s : url.sentinels) {
      SentinelView v = ask_sentinel(s, url.master_name, global_.connect, deadline());
      if (v.failure) {
        add(Level::problem, "sentinels", v.sentinel, "no answer: " + v.failure->message);
        continue;
      }
      ++answered;
      if (!first) first = std::move(v);
    }
    if (!first) return std::nullopt;
    std::string count = std::to_string(answered) + " of " + std::to_string(url.sentinels.size()) +
                        " sentinels in the URL answer";
    if (answered * 2 <= url.sentinels.size())
      add(Level::problem, "sentinels", "", count + ": a failover needs a majority of them");
    else
      add(Level::ok, "sentinels", "",
          count + "; quorum " + printable(field_of(first->master, "quorum")));
    return first;
  }

  // The server whose "ip" and "port" FIELDS (a sentinel's) name, reached as BASE is.
  Server ask_at(const RedisUrl& base, const Fields& fields, std::string role) {
    int port = static_cast<int>(whole_number(field_of(fields, "port")).value_or(0));
    return ask(at_address(base, field_of(fields, "ip"), port), std::move(role));
  }

  // Replicas against --min-replicas, and the failover window of the primary MASTER (as a
  // sentinel sees it) with the replicas IN_SYNC. After a switch the other replicas
  // resynchronise in part, at once; the old primary, which took writes after the replica it
  // meets, in full, after the new primary's repl-diskless-sync-delay. --min-replicas waits for
  // as many acknowledgements: when the other replicas are too few, for that full resync
  // (planned), or for the old primary's return (lost).
  void sentinel_failover(const Fields& master, const std::vector<Server>& in_sync) {
    if (in_sync.empty()) {
      replicas(0, "");
      add(Level::problem, "failover", "",
          "no replica in sync: no failover is possible, and a lost primary ends every lock "
          "until it is back");
      return;
    }
    size_t others = in_sync.size() - 1;
    bool needs_old_primary = static_cast<size_t>(run_.min_replicas) > others;
    bool assumed = false;
    Millis delay = diskless_delay(in_sync, assumed);
    if (!needs_old_primary)
      replicas(in_sync.size(), "");
    else
      add(Level::problem, "replicas", "",
          "--min-replicas " + std::to_string(run_.min_replicas) + " with " +
              counted(in_sync.size(), "replica") + ": once a failover has promoted one, " +
              (others == 0 ? std::string("none remains") : counted(others, "replica") + " remain") +
              " to acknowledge, so no lock is taken or renewed until the old primary "
              "is a replica again and resynchronised in full (after repl-diskless-sync-delay " +
              format_duration(delay) +
              "), and a primary lost for good stops every holder; add a replica");
    Millis down_after =
        std::min(Millis(whole_number(field_of(master, "down-after-milliseconds")).value_or(30000)),
                 k_longest_window);
    Millis lost = down_after + k_sentinel_vote + k_sentinel_switch + k_vanished_host;
    Millis planned =
        k_sentinel_switch + (needs_old_primary ? k_sentinel_demote + delay : Millis(0));
    std::string what = "a failover takes about " + format_duration(lost) +
                       " when the primary is lost (down-after-milliseconds " +
                       std::to_string(down_after.count()) +
                       ", a vote, the switch, and a renewal held by a host gone), " +
                       format_duration(planned) + " when planned (SENTINEL FAILOVER: the switch";
    if (needs_old_primary)
      what += ", the old primary's demotion and its full resync after repl-diskless-sync-delay " +
              format_duration(delay) +
              (assumed ? " (assumed: CONFIG GET is refused on a replica)" : "");
    what += "); failover-timeout " + printable(field_of(master, "failover-timeout")) +
            " ms bounds one that stalls";
    failover(std::max(lost, planned), what);
  }

  // The longest repl-diskless-sync-delay of REPLICAS (any may be promoted, and serve the
  // others' syncs), Redis's default where CONFIG GET is refused (ASSUMED then set).
  static Millis diskless_delay(const std::vector<Server>& replicas, bool& assumed) {
    Millis delay{0};
    for (const Server& r : replicas) {
      auto diskless = r.survey.config.find("repl-diskless-sync");
      auto d = r.survey.config.find("repl-diskless-sync-delay");
      if (diskless == r.survey.config.end() || d == r.survey.config.end()) {
        assumed = true;
        delay = std::max(delay, k_default_diskless_delay);
      } else if (diskless->second == "yes") {
        delay = std::max(delay, Millis(1000 * whole_number(d->second).value_or(0)));
      }
    }
    return delay;
  }

  bool redlock(const std::vector<std::string>& texts, std::string& topology) {
    auto redis = connect_redis(global_);
    size_t n = redis->node_count(), answered = 0;
    topology = "Redlock over " + std::to_string(n) + " servers";
    for (size_t i = 0; i < n; ++i) {
      Server s = ask(parse_redis_url(texts[i]), "node");
      judge(s);
      if (s.survey.unreachable) continue;
      ++answered;
      commands(redis->node(i), s.survey.name);
    }
    bool quorum = answered >= redlock_quorum(n);
    add(quorum ? Level::ok : Level::problem, "quorum", "",
        std::to_string(answered) + " of " + std::to_string(n) + " servers answer; a lock needs " +
            std::to_string(redlock_quorum(n)));
    add(Level::ok, "failover", "",
        "Redlock has no failover: a lock outlives any minority of servers down; --ttl " +
            format_duration(run_.ttl) + " rides through an outage of them all of " +
            format_duration(outage_ridden(run_.ttl, run_.kill_after)) + " at most");
    return quorum;
  }

  const GlobalOptions& global_;
  const RunOptions& run_;
  std::string key_;
  std::optional<Millis> kill_after_;  // given; else each ttl's default
  std::vector<Finding> findings_;
};

struct DoctorArgs : Arguments {
  std::optional<std::string> key;
  bool json = false;

  int run(const Invocation& in) override {
    const Resolved& r = in.resolved;
    std::string probe = in.key(key.value_or("rlock-doctor"));
    std::optional<Millis> kill_after;  // given (a flag, the environment, the config file)
    if (in.settings.count("kill-after")) kill_after = r.run.kill_after;
    return Doctor(r.global, r.run, probe, kill_after).examine(json);
  }
};

constexpr Option k_options[] = {
    option<&DoctorArgs::key>("KEY",
                             "the lock whose keys the ACL check tries (default: rlock-doctor)"),
    setting("ttl", "the ttl to judge the failover window against (default 30s)"),
    setting("kill-after"), setting("min-replicas"),
    option<&DoctorArgs::json>("--json", k_json_help)};

}  // namespace

constexpr Command k_doctor_command = {
    "doctor",
    "check that Redis is set up for locks",
    "[KEY]",
    {k_options, k_output, k_connection},
    "Reads each server's settings (and each sentinel's) and says, one line each, what matters "
    "to a lock: persistence, maxmemory-policy, keyspace notifications, the version and the "
    "commands the ACL user may run, the clock, proxies, TLS certificates, replicas, and the "
    "failover window against --ttl. It changes no key.\n"
    "Examples:\n"
    "  rlock doctor\n"
    "  rlock doctor lock:daily-report --ttl 1m\n"
    "Exit status: 0 nothing wrong, 1 a problem found, 69 Redis unreachable; 64 usage, "
    "78 configuration, 125 rlock failed.",
    make_arguments<DoctorArgs>};

}  // namespace rlock
