#include "redis/redis_url.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "util/error.h"
#include "util/text.h"

namespace rlock {

namespace {

// Where the user and password of TEXT end: its last '@' (no host, port, database or path of
// a redis:// URL has one, while an unencoded password may), or npos.
size_t userinfo_end(std::string_view text) {
  size_t scheme_end = text.find("://");
  size_t at = text.rfind('@');
  if (at == std::string_view::npos || (scheme_end != std::string_view::npos && at < scheme_end))
    return std::string_view::npos;
  return at;
}

bool all_digits(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

// TEXT without an '@': a password typed without its "@host" ("redis://user:secret",
// "redis://:secret/0") reads as a host and a port. So a port that is no number goes, in each
// of the comma-separated addresses (a Sentinel URL has several), SECRET in its place.
std::string without_would_be_password(std::string_view text, std::string_view secret) {
  size_t scheme_end = text.find("://");
  if (scheme_end == std::string_view::npos) return std::string(text);
  size_t start = scheme_end + 3;
  size_t end = text.find_first_of("/?#", start);
  if (end == std::string_view::npos) end = text.size();
  std::string out(text.substr(0, start));
  std::string_view addresses = text.substr(start, end - start);
  for (bool first = true;; first = false) {
    size_t comma = addresses.find(',');
    std::string_view address = addresses.substr(0, comma);
    size_t bracket = !address.empty() && address[0] == '[' ? address.find(']') : 0;
    size_t colon = address.find(':', bracket == std::string_view::npos ? 0 : bracket);
    std::string_view port = colon == std::string_view::npos ? "" : address.substr(colon + 1);
    if (!first) out += ',';
    if (colon == std::string_view::npos || all_digits(port))
      out += address;
    else
      out += std::string(address.substr(0, colon + 1)) + std::string(secret);
    if (comma == std::string_view::npos) break;
    addresses = addresses.substr(comma + 1);
  }
  return out + std::string(text.substr(end));
}

}  // namespace

std::string without_userinfo(std::string_view text) {
  size_t at = userinfo_end(text);
  if (at == std::string_view::npos) return without_would_be_password(text, k_redacted_secret);
  size_t scheme_end = text.find("://");
  size_t start = scheme_end == std::string_view::npos ? 0 : scheme_end + 3;
  return std::string(text.substr(0, start)) + k_redacted_secret + std::string(text.substr(at));
}

namespace {

[[noreturn]] void bad_url(std::string_view text, const std::string& why) {
  throw Error(k_exit_config, "bad Redis URL '" + without_userinfo(text) + "': " + why);
}

std::string hex_byte(char c) {
  std::string out;
  append_hex(out, static_cast<unsigned char>(c));
  for (char& h : out) h = static_cast<char>(std::toupper(static_cast<unsigned char>(h)));
  return out;
}

std::string percent_encode_userinfo(std::string_view text) {
  std::string out;
  for (char c : text) {
    auto b = static_cast<unsigned char>(c);
    if (std::isalnum(b) || std::string_view("-._~!$&'()*+,;=").find(c) != std::string_view::npos) {
      out += c;
    } else {
      out += '%';
      append_hex(out, b);
    }
  }
  return out;
}

std::optional<int> parse_int(std::string_view s, int min, int max) {
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < min || v > max)
    return std::nullopt;
  return v;
}

constexpr int k_max_db = 1 << 20;  // far above any server's "databases" setting

}  // namespace

namespace {

// TEXT with what may be a password, between "://" and the last '@', replaced by SECRET; with
// no secret in its place, the '@' goes too when no user is left.
std::string replace_password(std::string_view text, std::string_view secret) {
  size_t scheme_end = text.find("://");
  size_t at = userinfo_end(text);
  size_t auth_start = scheme_end + 3;
  std::string_view userinfo = text.substr(auth_start, at - auth_start);
  size_t colon = userinfo.find(':');
  std::string out(text.substr(0, auth_start));
  // "redis://secret@host": a lone userinfo is the password; "redis://user:secret@host" keeps
  // the user, unless it is no plain name (then it may be a password typed without its ':').
  std::string_view user = colon == std::string_view::npos ? "" : userinfo.substr(0, colon);
  bool plain_user = user.find_first_of("/?#") == std::string_view::npos;
  // "redis://user:@host" has no password to hide (it comes from elsewhere): shown as given.
  if (plain_user && !user.empty() && colon + 1 == userinfo.size()) secret = "";
  bool keep_user =
      colon != std::string_view::npos && plain_user && (!user.empty() || !secret.empty());
  if (keep_user) out += userinfo.substr(0, colon + 1);
  out += secret;
  out += text.substr(keep_user || !secret.empty() ? at : at + 1);
  return out;
}

}  // namespace

namespace {

// TEXT with what may be a password in it written as SECRET: whatever sits between "://" and the
// last '@' but a plain user name, all before an '@' without "://", or a port that is no number
// where there is no '@'.
std::string redacted_with(std::string_view text, std::string_view secret) {
  size_t at = userinfo_end(text);
  if (at == std::string_view::npos) return without_would_be_password(text, secret);
  if (text.find("://") == std::string_view::npos)
    return std::string(secret) + std::string(text.substr(at));
  return replace_password(text, secret);
}

}  // namespace

std::string redact_url_text(std::string_view text) {
  return redacted_with(text, k_redacted_secret);
}

std::string masked_url_text(std::string_view text) {
  if (text.find('\0') != std::string_view::npos) return std::string(text.size(), '*');
  // Each NUL of MARKED stands for a password; what surrounds it is TEXT's own bytes. A password
  // ends at the '@', or where there is none, at the end of its address.
  std::string marked = redacted_with(text, std::string_view("", 1));
  std::string out;
  size_t at = userinfo_end(text);
  size_t i = 0;
  for (char c : marked) {
    if (c != '\0') {
      out += text[i++];
      continue;
    }
    size_t end =
        std::min(at != std::string_view::npos ? at : text.find_first_of(",/?#", i), text.size());
    out.append(std::min(end - i, k_masked_secret.size()), '*');
    i = end;
  }
  return out;
}

std::string without_password(std::string_view text) {
  if (text.find("://") == std::string_view::npos || userinfo_end(text) == std::string_view::npos)
    return std::string(text);
  return replace_password(text, "");
}

namespace {

RedisUrl::Scheme parse_scheme(std::string_view text, std::string_view scheme) {
  if (scheme == "redis") return RedisUrl::Scheme::tcp;
  if (scheme == "rediss") return RedisUrl::Scheme::tls;
  if (scheme == "unix") return RedisUrl::Scheme::unix_socket;
  bad_url(text, "unknown scheme '" + std::string(scheme) + "' (expected " + k_url_schemes + ")");
}

// unix:///path[?db=N]: REST is what follows "unix://".
void parse_unix_socket(std::string_view text, std::string_view rest, RedisUrl& url) {
  size_t q = rest.find('?');
  std::string_view path = rest.substr(0, q);
  if (path.empty() || path[0] != '/')
    bad_url(text, "a unix socket path must be absolute (unix:///path/redis.sock)");
  url.path = std::string(path);
  if (q == std::string_view::npos) return;
  std::string_view query = rest.substr(q + 1);
  if (query.substr(0, 3) != "db=") bad_url(text, "the only query parameter is db=N");
  auto db = parse_int(query.substr(3), 0, k_max_db);
  if (!db) bad_url(text, "database '" + std::string(query.substr(3)) + "' is not a number");
  url.db = *db;
}

// The user and password, before the last '@' (where they may hold a '/').
void parse_userinfo(std::string_view text, std::string_view userinfo, RedisUrl& url) {
  if (size_t bad = userinfo.find_first_of("/?#"); bad != std::string_view::npos)
    bad_url(text, std::string("the user or password has an unencoded '") + userinfo[bad] +
                      "': percent-encode it as %" + hex_byte(userinfo[bad]));
  size_t colon = userinfo.find(':');
  // redis-cli and most clients read "redis://:pass@h" as a password alone, "redis://u:p@h" as
  // an ACL user and password, and "redis://secret@h" as a password alone.
  std::string_view user =
      colon == std::string_view::npos ? std::string_view{} : userinfo.substr(0, colon);
  std::string_view pass = colon == std::string_view::npos ? userinfo : userinfo.substr(colon + 1);
  auto user_decoded = percent_decode(user);
  auto pass_decoded = percent_decode(pass);
  if (!user_decoded || !pass_decoded)
    bad_url(text, "a '%' in the user or password starts no %-escape: percent-encode a '%' "
                  "as %25");
  if (!user_decoded->empty()) url.user = *user_decoded;
  if (!pass_decoded->empty()) url.password = *pass_decoded;
}

// HOST[:PORT] or [IPV6][:PORT]: the host into URL, the port's text returned (empty: none).
std::string_view parse_host(std::string_view text, std::string_view authority, RedisUrl& url) {
  std::string_view port_text;
  if (!authority.empty() && authority[0] == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) bad_url(text, "unclosed '[' in an IPv6 address");
    url.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') bad_url(text, "expected ':port' after ']'");
      port_text = after.substr(1);
      if (port_text.empty()) bad_url(text, "empty port");
    }
  } else {
    size_t colon = authority.rfind(':');
    url.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) bad_url(text, "empty port");
    }
    if (url.host.find(':') != std::string::npos)
      bad_url(text, "an IPv6 address must be in brackets: redis://[::1]:6379 (or is the '@' "
                    "after a password missing?)");
  }
  if (url.host.empty()) bad_url(text, "no host");
  if (url.host.size() > 253) bad_url(text, "the host name is longer than 253 characters");
  for (char c : url.host)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_' &&
        c != ':' && c != '%')  // ':' and '%' only get here inside [IPv6%zone]
      bad_url(text, "the host has a character no host name or address has");
  return port_text;
}

}  // namespace

RedisUrl parse_redis_url(std::string_view text) {
  RedisUrl url;
  size_t scheme_end = text.find("://");
  if (scheme_end == std::string_view::npos) bad_url(text, std::string("expected ") + k_url_schemes);
  url.scheme = parse_scheme(text, text.substr(0, scheme_end));
  std::string_view rest = text.substr(scheme_end + 3);
  if (url.scheme == RedisUrl::Scheme::unix_socket) {
    parse_unix_socket(text, rest, url);
    return url;
  }
  size_t at = rest.rfind('@');
  if (at != std::string_view::npos) {
    parse_userinfo(text, rest.substr(0, at), url);
    rest = rest.substr(at + 1);
  }
  size_t slash = rest.find('/');
  if (slash != std::string_view::npos) {
    std::string_view db = rest.substr(slash + 1);
    if (!db.empty()) {
      auto n = parse_int(db, 0, k_max_db);
      if (!n) bad_url(text, "database '" + std::string(db) + "' is not a number");
      url.db = *n;
    }
  }
  std::string_view port_text = parse_host(text, rest.substr(0, slash), url);
  if (!port_text.empty()) {
    auto port = parse_int(port_text, 1, 65535);
    // Without an '@', a port that is no number may be a password typed without its "@host":
    // not shown.
    if (!port && at == std::string_view::npos && !all_digits(port_text))
      bad_url(text, "the port is not a number (a password goes before an '@': "
                    "redis://user:password@host:port)");
    if (!port)
      bad_url(text, "port '" + std::string(port_text) + "' is not a number from 1 to 65535");
    url.port = *port;
  }
  return url;
}

std::vector<RedisUrl> parse_redis_seeds(std::string_view text) {
  size_t scheme_end = text.find("://");
  if (scheme_end == std::string_view::npos || text.substr(0, scheme_end) == "unix")
    return {parse_redis_url(text)};
  // SCHEME://USERINFO@ ADDRESSES /REST, where only ADDRESSES may hold a comma.
  size_t start = scheme_end + 3;
  size_t at = userinfo_end(text);
  if (at != std::string_view::npos) start = at + 1;
  size_t end = text.find('/', start);
  if (end == std::string_view::npos) end = text.size();
  std::string_view addresses = text.substr(start, end - start);
  if (addresses.find(',') == std::string_view::npos) return {parse_redis_url(text)};
  std::vector<RedisUrl> seeds;
  for (;;) {
    size_t comma = addresses.find(',');
    std::string_view address = addresses.substr(0, comma);
    if (address.empty()) bad_url(text, "an empty address in a list of Cluster seeds");
    seeds.push_back(parse_redis_url(std::string(text.substr(0, start)) + std::string(address) +
                                    std::string(text.substr(end))));
    if (comma == std::string_view::npos) break;
    addresses = addresses.substr(comma + 1);
  }
  return seeds;
}

std::string RedisUrl::redacted() const {
  std::string out;
  switch (scheme) {
  case Scheme::unix_socket:
    out = "unix://" + path;
    if (db != 0) out += "?db=" + std::to_string(db);
    return out;
  case Scheme::tcp: out = "redis://"; break;
  case Scheme::tls: out = "rediss://"; break;
  }
  // A printed URL parses back to the same place: the user %-escaped, and "user:@" when there
  // is no password (a lone "user@" would read as a password).
  if (user) out += percent_encode_userinfo(*user);
  if (password) out += std::string(":") + k_redacted_secret;
  if (user && !password) out += ":";
  if (user || password) out += "@";
  out += endpoint();
  if (db != 0) out += "/" + std::to_string(db);
  return out;
}

std::string RedisUrl::endpoint() const {
  if (scheme == Scheme::unix_socket) return path;
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace rlock
