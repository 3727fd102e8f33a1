// libFuzzer target: parse_redis_url (and parse_sentinel_url) either parses or throws rlock::Error with exit status 78;
// its redacted form (the only one printed) parses back to the same place, password hidden.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "redis/redis_url.h"
#include "redis/sentinel.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    if (rlock::is_sentinel_url(text)) {
      rlock::SentinelUrl s = rlock::parse_sentinel_url(text);
      if (s.sentinels.empty() || s.master_name.empty()) std::abort();
      return 0;
    }
    rlock::RedisUrl url = rlock::parse_redis_url(text);
    if (url.scheme != rlock::RedisUrl::Scheme::unix_socket &&
        (url.host.empty() || url.port < 1 || url.port > 65535))
      std::abort();
    if (url.db < 0) std::abort();
    // What it prints parses to the same place, with the password (if any) as "***": the
    // redacted form is the only one that reaches output.
    rlock::RedisUrl again = rlock::parse_redis_url(url.redacted());
    if (again.host != url.host || again.port != url.port || again.db != url.db ||
        again.path != url.path || again.user != url.user ||
        again.password !=
            (url.password ? std::optional<std::string>(rlock::k_redacted_secret) : std::nullopt))
      std::abort();
  } catch (const rlock::Error& e) {
    if (e.exit_status() != rlock::k_exit_config) std::abort();
  }
  return 0;
}
