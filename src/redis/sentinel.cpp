#include "redis/sentinel.h"

#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>

#include "redis/exchange.h"
#include "redis/redis_node.h"
#include "util/error.h"

namespace rlock {

namespace {

[[noreturn]] void bad_sentinel_url(std::string_view text, const std::string& why) {
  throw Error(k_exit_config, "bad Sentinel URL '" + without_userinfo(text) + "': " + why);
}

// Commands that change nothing: their replies need no word from the sentinels on where they
// ran. Anything else (the lock scripts above all) is a write.
bool is_read(const Argv& argv) {
  static const char* const k_reads[] = {
      "GET",      "MGET",      "PTTL",   "TTL",    "TYPE",  "EXISTS", "TIME", "SCAN",
      "XRANGE",   "XREVRANGE", "XLEN",   "ZRANGE", "ZCARD", "ZSCORE", "HGET", "HGETALL",
      "HMGET",    "INFO",      "ROLE",   "PING",   "WAIT",  "CONFIG", "LLEN", "LRANGE",
      "SMEMBERS", "SCARD",     "DBSIZE", "CLIENT", "ECHO",  "SELECT"};
  if (argv.empty()) return true;
  for (const char* read : k_reads)
    if (strcasecmp(argv[0].c_str(), read) == 0) return true;
  return false;
}

bool any_write(const std::vector<Argv>& commands) {
  return std::any_of(commands.begin(), commands.end(), [](const Argv& a) { return !is_read(a); });
}

// How long to wait between looks at sentinels that are failing over.
constexpr Millis k_failover_poll{100};
// A read goes where the sentinels last named the primary; once that is this old, they are
// asked again first. A planned failover leaves the old primary up as a replica, answering
// reads with what it last copied: watch and logs -f would follow it for seconds (until the
// sentinels close its clients' connections), seeing nothing of the run on the new primary.
constexpr Millis k_primary_recheck{1000};
// How long that asking may take of a read.
constexpr Millis k_recheck_patience{500};

// Why a write behind Sentinel counts only once the sentinels confirm where it ran:
//
// Sentinel names the new primary as soon as it has promoted a replica, but the old primary
// stays a writable primary until Sentinel demotes it, seconds later. A holder that kept
// renewing there would renew a key that no longer matters: new clients, sent to the new
// primary, find the key as last replicated and take it when it expires there, while the old
// holder's command runs on (measured before this: 7.5 s of overlap with a 3 s ttl). So after
// every write (acquire, renew, release) the sentinels are asked, all at once: the write counts
// when every sentinel that answers names the node it ran on as primary and none has a failover
// of it in progress. A failover in progress (from its start, before any replica is promoted)
// or sentinels that disagree (the others learn of a switch a second or two after its leader)
// leave the write unconfirmed: it is asked again every k_failover_poll until the caller's
// deadline, and a renewal that stays unconfirmed is a failed renewal (the renewals retry,
// and the command is stopped if the lease runs out first). Once the sentinels agree on another
// primary, the same commands are sent there: the lock is kept when the new primary has it
// with our token, and lost (the renewal says "not mine") when it does not. Only a write
// replicated to the promoted replica before the failover began is on it: what async
// replication had not copied yet is lost with the old primary (--min-replicas narrows that).
class SentinelRedis final : public Redis {
public:
  SentinelRedis(SentinelUrl url, ConnectOptions options)
      : url_(std::move(url)), options_(std::move(options)) {
    for (const RedisUrl& u : url_.sentinels) sentinels_.push_back({u, nullptr, false});
  }

  Result<std::vector<Reply>> pipeline(const std::vector<Argv>& commands,
                                      TimePoint deadline) override {
    bool write = any_write(commands);
    if (!write) recheck_primary(deadline);
    for (int attempt = 0;; ++attempt) {
      auto node = primary(deadline);
      if (!node) return node.failure();
      auto replies = (*node)->pipeline(commands, deadline);
      if (!replies) {
        primary_.reset();  // the next call asks the sentinels again
        return replies;
      }
      bool demoted = false;
      for (const Reply& r : *replies)
        if (r.type == Reply::Type::error && error_code(r.str) == "READONLY") demoted = true;
      // READONLY: the node we knew as primary is a replica now, and wrote nothing. Ask the
      // sentinels for the new primary and send the same commands there, once.
      if (demoted && attempt == 0) {
        primary_.reset();
        continue;
      }
      if (!write || demoted) return replies;
      auto named = settled_primary(deadline);
      if (!named) return named.failure();
      const RedisUrl& ran_on = (*node)->url();
      if (named->first == ran_on.host && named->second == ran_on.port) {
        primary_named_at_ = Clock::now();
        return replies;
      }
      // Another primary now: what ran here may not be on it. The same commands go there, once.
      primary_.reset();
      if (attempt > 0)
        return Failure{Failure::Kind::timeout,
                       url_.redacted + ": the primary changed twice during one command"};
    }
  }

  Result<Reply> blocking_call(const Argv& argv, TimePoint deadline, int interrupt_fd) override {
    // A blocked pop waits where the sentinels name the primary too (blocking_slice()).
    recheck_primary(deadline);
    auto node = primary(deadline);
    if (!node) return node.failure();
    auto reply = (*node)->blocking_call(argv, deadline, interrupt_fd);
    // UNBLOCKED: a blocked read (XREAD BLOCK) let go as its server became a replica.
    if (!reply && (reply.failure().kind != Failure::Kind::server ||
                   reply.failure().code == "READONLY" || reply.failure().code == "UNBLOCKED"))
      primary_.reset();
    return reply;
  }

  std::string name() const override { return url_.redacted; }
  Millis command_timeout() const override { return options_.command_timeout; }

  Result<OwnConnection> own_connection(const std::string& key, TimePoint deadline) override {
    recheck_primary(deadline);
    auto node = primary(deadline);
    if (!node) return node.failure();
    return (*node)->own_connection(key, deadline);
  }

  std::optional<Millis> blocking_slice() const override { return k_primary_recheck; }
  bool can_fail_over() const override { return true; }

  std::string server_of(const std::string&) override {
    return primary_ ? primary_->name() : std::string();
  }

  Result<Unit> for_each_primary(const std::function<Result<Unit>(Redis&)>& f,
                                TimePoint deadline) override {
    auto node = primary(deadline);
    if (!node) return node.failure();
    return f(**node);
  }

private:
  using Address = std::pair<std::string, int>;

  // One sentinel, over a connection kept for the next question. Sentinels often have no
  // password of their own: asked without one first, then with the URL's after NOAUTH.
  struct SentinelLink {
    RedisUrl url;
    std::unique_ptr<NodeRedis> node;
    bool with_password;
  };

  Result<NodeRedis*> primary(TimePoint deadline) {
    if (primary_) return primary_.get();
    auto address = settled_primary(deadline);
    if (!address) return address.failure();
    RedisUrl master = url_.sentinels.front();
    master.scheme = url_.tls ? RedisUrl::Scheme::tls : RedisUrl::Scheme::tcp;
    master.host = address->first;
    master.port = address->second;
    master.db = url_.db;
    auto node = std::make_unique<NodeRedis>(master, options_);
    // The sentinels may name a replica they are still promoting.
    auto role = node->call({"ROLE"}, deadline);
    if (!role) return role.failure();
    if (!role->is_array() || role->elements.empty() || role->elements[0].str != "master")
      return Failure{Failure::Kind::connect,
                     url_.redacted + ": the sentinels name " + master.endpoint() +
                         " as primary, but it is a " +
                         (role->elements.empty() ? "?" : role->elements[0].str) +
                         " (a failover in progress?)"};
    primary_ = std::move(node);
    primary_named_at_ = Clock::now();
    return primary_.get();
  }

  // Before a read: the sentinels asked again once the primary was named k_primary_recheck
  // ago, and the primary forgotten when the first to answer names another (primary() then
  // asks them all). While they fail over or do not answer, reads go on where they went; a
  // sentinel that does not answer costs a read nothing when another does.
  void recheck_primary(TimePoint deadline) {
    if (!primary_ || Clock::now() - primary_named_at_ < k_primary_recheck) return;
    // Its own short budget, and not again for a second when no sentinel answered in it:
    // silent sentinels cost a read a little, never the read itself.
    auto named = ask_sentinels(std::min(deadline, Clock::now() + k_recheck_patience), 1);
    if (!named) {
      primary_named_at_ = Clock::now();
      return;
    }
    const RedisUrl& u = primary_->url();
    if (named->first != u.host || named->second != u.port)
      primary_.reset();
    else
      primary_named_at_ = Clock::now();
  }

  // The primary every answering sentinel names, with no failover of it in progress; while
  // they fail over or disagree, asked again until DEADLINE (then a failure of kind timeout:
  // whatever was written meanwhile is unconfirmed).
  Result<Address> settled_primary(TimePoint deadline) {
    for (;;) {
      auto asked = ask_sentinels(deadline);
      if (asked.ok() || asked.failure().kind != Failure::Kind::timeout) return asked;
      if (Clock::now() + k_failover_poll >= deadline) return asked;
      ::usleep(static_cast<useconds_t>(std::chrono::microseconds(k_failover_poll).count()));
    }
  }

  // A node for each sentinel, made on first use: without the URL's password unless that
  // sentinel asked for one.
  std::vector<NodeRedis*> sentinel_nodes() {
    std::vector<NodeRedis*> nodes;
    for (SentinelLink& s : sentinels_) {
      if (!s.node) {
        RedisUrl u = s.url;
        ConnectOptions o = options_;
        if (!s.with_password) {
          u.user.reset();
          u.password.reset();
          o.password = {};
        }
        s.node = std::make_unique<NodeRedis>(u, o);
      }
      nodes.push_back(s.node.get());
    }
    return nodes;
  }

  // What the sentinels said, heard one at a time (ask_sentinels).
  struct Answers {
    std::optional<Address> named;    // the primary the first to name one named
    std::optional<Failure> unknown;  // a sentinel knows no primary of that name
    std::optional<Failure> doubt;    // a failover in progress, or sentinels that disagree
    std::optional<Failure> last;     // the last sentinel that did not answer, and why
    bool asked_again = false;        // a sentinel wants the password: asked again next time
  };

  void hear(Answers& a, SentinelLink& s, NodeRedis& node, const Result<std::vector<Reply>>& r) {
    std::string who = "sentinel " + s.url.endpoint();
    if (!r) {
      a.last = r.failure();
      return;
    }
    const Reply& flags_reply = (*r)[0];
    const Reply& addr = (*r)[1];
    if (addr.type == Reply::Type::error) {
      if (error_code(addr.str) == "NOAUTH" && !s.with_password) {
        s.with_password = true;  // asked again with the URL's password, on the next look
        s.node.reset();
        a.asked_again = true;
        return;
      }
      a.last = node.server_failure(addr.str);
      return;
    }
    if (addr.is_nil()) {
      a.unknown = Failure{Failure::Kind::server,
                          url_.redacted + ": the sentinels know no primary named '" +
                              url_.master_name + "'",
                          "", Failure::Why::unknown_primary};
      return;
    }
    auto here = parse_address(addr);
    if (!here) {
      a.last = Failure{Failure::Kind::protocol, who + ": unexpected reply to SENTINEL"};
      return;
    }
    if (failing_over(flags_reply))
      a.doubt = Failure{Failure::Kind::timeout,
                        url_.redacted + ": a failover is in progress (" + who + ")"};
    else if (a.named && *a.named != *here)
      a.doubt =
          Failure{Failure::Kind::timeout,
                  url_.redacted + ": the sentinels disagree on the primary (" + a.named->first +
                      ":" + std::to_string(a.named->second) + " or " + here->first + ":" +
                      std::to_string(here->second) + "): a failover is being announced"};
    if (!a.named) a.named = here;
  }

  // Every sentinel at once: SENTINEL MASTER (its flags say whether a failover is in progress)
  // and GET-MASTER-ADDR-BY-NAME (which names the promoted replica as soon as it is promoted).
  Result<Address> ask_sentinels(TimePoint deadline, size_t enough = k_all_nodes) {
    const Argv master{"SENTINEL", "master", url_.master_name};
    const Argv address{"SENTINEL", "get-master-addr-by-name", url_.master_name};
    std::vector<NodeRedis*> nodes = sentinel_nodes();
    auto results = exchange(nodes, std::vector<std::vector<Argv>>(nodes.size(), {master, address}),
                            std::min(deadline, Clock::now() + options_.command_timeout),
                            enough == k_all_nodes ? Enough{} : Enough{enough, [](const Reply& r) {
                                                                        return r.is_array();
                                                                      }});
    Answers a;
    for (size_t i = 0; i < results.size(); ++i) hear(a, sentinels_[i], *nodes[i], results[i]);
    if (a.unknown) return *a.unknown;
    if (a.doubt) return *a.doubt;
    if (a.named) return *a.named;
    if (a.asked_again) return Failure{Failure::Kind::timeout, url_.redacted + ": asking again"};
    return a.last.value_or(
        Failure{Failure::Kind::connect, url_.redacted + ": no sentinel answered"});
  }

  static std::optional<Address> parse_address(const Reply& reply) {
    if (!reply.is_array() || reply.elements.size() != 2) return std::nullopt;
    int port = 0;
    const std::string& digits = reply.elements[1].str;
    auto [end, err] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
    if (err != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
    return Address{reply.elements[0].str, port};
  }

  // SENTINEL MASTER's reply is field, value, field, value ...: whether "flags" says a failover
  // of the primary is in progress.
  static bool failing_over(const Reply& reply) {
    if (!reply.is_array()) return false;
    for (size_t i = 0; i + 1 < reply.elements.size(); i += 2)
      if (reply.elements[i].str == "flags")
        return reply.elements[i + 1].str.find("failover_in_progress") != std::string::npos;
    return false;
  }

  SentinelUrl url_;
  ConnectOptions options_;
  std::vector<SentinelLink> sentinels_;
  std::unique_ptr<NodeRedis> primary_;
  TimePoint primary_named_at_{};  // when the sentinels last named primary_
};

}  // namespace

bool is_sentinel_url(std::string_view text) {
  return text.rfind("redis-sentinel://", 0) == 0 || text.rfind("rediss-sentinel://", 0) == 0;
}

SentinelUrl parse_sentinel_url(std::string_view text) {
  SentinelUrl out;
  out.tls = text.rfind("rediss-sentinel://", 0) == 0;
  std::string_view rest = text.substr(text.find("://") + 3);
  // The user and password first, up to the last '@' (as in a redis:// URL, where they are
  // checked): an unencoded '/' in a password must not be taken for the primary's name.
  size_t at = rest.rfind('@');
  std::string userinfo = at == std::string_view::npos ? "" : std::string(rest.substr(0, at + 1));
  if (at != std::string_view::npos) rest = rest.substr(at + 1);
  size_t slash = rest.find('/');
  if (slash == std::string_view::npos || slash + 1 == rest.size())
    bad_sentinel_url(text, "no primary name (redis-sentinel://host:26379/mymaster)");
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = rest.substr(slash + 1);
  size_t q = path.find('?');
  out.master_name = std::string(path.substr(0, q));
  if (out.master_name.empty())
    bad_sentinel_url(text, "no primary name (redis-sentinel://host:26379/mymaster)");
  if (q != std::string_view::npos) {
    std::string_view query = path.substr(q + 1);
    if (query.substr(0, 3) != "db=") bad_sentinel_url(text, "the only query parameter is db=N");
    // Checked the way a redis:// URL's database is.
    out.db = parse_redis_url("redis://h/" + std::string(query.substr(3))).db;
  }
  std::string_view hosts = authority;
  std::string scheme = out.tls ? "rediss://" : "redis://";
  while (true) {
    size_t comma = hosts.find(',');
    std::string_view host = hosts.substr(0, comma);
    if (host.empty()) bad_sentinel_url(text, "an empty sentinel address");
    RedisUrl url = parse_redis_url(scheme + userinfo + std::string(host));
    if (host.find(':') == std::string_view::npos || host.back() == ']') url.port = 26379;
    out.sentinels.push_back(url);
    if (comma == std::string_view::npos) break;
    hosts = hosts.substr(comma + 1);
  }
  out.redacted = redact_url_text(text);
  return out;
}

std::unique_ptr<Redis> make_sentinel_redis(const SentinelUrl& url, const ConnectOptions& options) {
  return std::make_unique<SentinelRedis>(url, options);
}

}  // namespace rlock
