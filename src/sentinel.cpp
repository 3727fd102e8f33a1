#include "sentinel.h"

#include "error.h"
#include "redis_node.h"

namespace rlock {

namespace {

[[noreturn]] void bad_sentinel_url(std::string_view text, const std::string& why) {
  throw Error(k_exit_config, "bad Sentinel URL '" + without_userinfo(text) + "': " + why);
}

class SentinelRedis final : public Redis {
public:
  SentinelRedis(SentinelUrl url, ConnectOptions options)
      : url_(std::move(url)), options_(std::move(options)) {}

  Result<std::vector<Reply>> pipeline(const std::vector<Argv>& commands,
                                      TimePoint deadline) override {
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
      if (!demoted || attempt == 1) return replies;
      primary_.reset();
    }
  }

  Result<Reply> blocking_call(const Argv& argv, TimePoint deadline, int interrupt_fd) override {
    auto node = primary(deadline);
    if (!node) return node.failure();
    auto reply = (*node)->blocking_call(argv, deadline, interrupt_fd);
    if (!reply &&
        (reply.failure().kind != Failure::Kind::server || reply.failure().code == "READONLY"))
      primary_.reset();
    return reply;
  }

  std::string name() const override { return url_.redacted; }
  Millis command_timeout() const override { return options_.command_timeout; }

  Result<OwnConnection> own_connection(const std::string& key, TimePoint deadline) override {
    auto node = primary(deadline);
    if (!node) return node.failure();
    return (*node)->own_connection(key, deadline);
  }

  Result<Unit> for_each_primary(const std::function<Result<Unit>(Redis&)>& f,
                                TimePoint deadline) override {
    auto node = primary(deadline);
    if (!node) return node.failure();
    return f(**node);
  }

private:
  Result<NodeRedis*> primary(TimePoint deadline) {
    if (primary_) return primary_.get();
    Failure last{Failure::Kind::connect, url_.redacted + ": no sentinel answered"};
    for (const RedisUrl& sentinel_url : url_.sentinels) {
      auto address = ask_sentinel(sentinel_url, deadline);
      if (!address) {
        last = address.failure();
        if (last.kind == Failure::Kind::server && last.why == Failure::Why::unknown_primary)
          return last;
        continue;
      }
      RedisUrl master = sentinel_url;
      master.scheme = url_.tls ? RedisUrl::Scheme::tls : RedisUrl::Scheme::tcp;
      master.host = address->first;
      master.port = address->second;
      master.db = url_.db;
      auto node = std::make_unique<NodeRedis>(master, options_);
      // The sentinels may still name the old primary for a moment during a failover.
      auto role = node->call({"ROLE"}, deadline);
      if (!role) return role.failure();
      if (!role->is_array() || role->elements.empty() || role->elements[0].str != "master")
        return Failure{Failure::Kind::connect,
                       url_.redacted + ": the sentinels name " + master.endpoint() +
                           " as primary, but it is a " +
                           (role->elements.empty() ? "?" : role->elements[0].str) +
                           " (a failover in progress?)"};
      primary_ = std::move(node);
      return primary_.get();
    }
    return last;
  }

  // SENTINEL GET-MASTER-ADDR-BY-NAME on one sentinel. Sentinels often have no password of
  // their own: ask without one first, then with the URL's.
  Result<std::pair<std::string, int>> ask_sentinel(const RedisUrl& sentinel_url,
                                                   TimePoint deadline) {
    RedisUrl anonymous = sentinel_url;
    anonymous.user.reset();
    anonymous.password.reset();
    ConnectOptions plain = options_;
    plain.password.reset();
    Argv ask{"SENTINEL", "get-master-addr-by-name", url_.master_name};
    auto reply = NodeRedis(anonymous, plain).call(ask, deadline);
    if (!reply && reply.failure().code == "NOAUTH")
      reply = NodeRedis(sentinel_url, options_).call(ask, deadline);
    if (!reply) return reply.failure();
    if (reply->is_nil())
      return Failure{Failure::Kind::server,
                     url_.redacted + ": the sentinels know no primary named '" + url_.master_name +
                         "'",
                     "", Failure::Why::unknown_primary};
    if (!reply->is_array() || reply->elements.size() != 2)
      return Failure{Failure::Kind::protocol,
                     sentinel_url.endpoint() + ": unexpected reply to SENTINEL"};
    try {
      return std::make_pair(reply->elements[0].str, std::stoi(reply->elements[1].str));
    } catch (const std::exception&) {
      return Failure{Failure::Kind::protocol,
                     sentinel_url.endpoint() + ": unexpected reply to SENTINEL"};
    }
  }

  SentinelUrl url_;
  ConnectOptions options_;
  std::unique_ptr<NodeRedis> primary_;
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
