// Where a Redis is: redis://[user[:pass]@]host[:port][/db], rediss://... (TLS),
// unix:///path/redis.sock[?db=N]. Pure parsing; no I/O.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rlock {

inline constexpr int k_default_redis_port = 6379;
inline constexpr const char* k_default_redis_url = "redis://127.0.0.1:6379";
inline constexpr const char* k_redacted_secret = "***";
// Every kind of URL rlock takes, as error messages list them.
inline constexpr const char* k_url_schemes =
    "redis://, rediss://, unix://, redis-sentinel:// or rediss-sentinel://";

struct RedisUrl {
  enum class Scheme { tcp, tls, unix_socket };
  Scheme scheme = Scheme::tcp;
  std::string host;  // tcp/tls: name or address (IPv6 without brackets)
  int port = k_default_redis_port;
  std::string path;  // unix_socket
  int db = 0;
  std::optional<std::string> user;
  std::optional<std::string> password;

  // The URL with the password replaced by k_redacted_secret: the only form that reaches output.
  std::string redacted() const;
  // "host:port" or the socket path, for messages.
  std::string endpoint() const;
};

// Throws Error(k_exit_config) naming the part that is wrong; the message holds no part of the
// user or password.
RedisUrl parse_redis_url(std::string_view text);

// A Redis Cluster's seeds: redis://[user[:pass]@]host1:port1,host2:port2[/db] (rediss:// for
// TLS), each address with the URL's user and password, as parse_redis_url() reads them. Any
// other URL is one seed, so this takes every URL parse_redis_url() takes. Throws as it does,
// and for an empty address in the list.
std::vector<RedisUrl> parse_redis_seeds(std::string_view text);

// TEXT with any password in it replaced by k_redacted_secret (everything before the last '@'
// but a plain user name), for showing URLs as given (`rlock config`).
std::string redact_url_text(std::string_view text);

// How masked_url_text() writes a password: the same three stars whatever its length, which
// would otherwise show in ps.
inline constexpr std::string_view k_masked_secret = "***";

// TEXT with any password in it (as redact_url_text() finds it) written k_masked_secret, or as
// many '*' as it has bytes when it has fewer: never longer than TEXT, so that it can overwrite
// TEXT where it is, as rlock's own argv (ps).
std::string masked_url_text(std::string_view text);

// TEXT with any password taken out (redis://user:pw@h is redis://user:@h, a user whose password
// comes from elsewhere; redis://pw@h is redis://h), for the command's environment.
std::string without_password(std::string_view text);

// TEXT for an error message: the user and password (everything before the last '@') go whole.
std::string without_userinfo(std::string_view text);

}  // namespace rlock
