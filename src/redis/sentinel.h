// Redis Sentinel: redis-sentinel://[user:pass@]host:26379[,host2:26379...]/master-name[?db=N]
// (rediss-sentinel:// for TLS to the sentinels and the primary alike). The primary is asked of
// the sentinels, checked with ROLE, and asked for again after a lost connection or a READONLY
// reply: a failover is followed without a change to the URL.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "redis/connection.h"
#include "redis/redis.h"
#include "redis/redis_url.h"

namespace rlock {

struct SentinelUrl {
  std::vector<RedisUrl> sentinels;  // each with the URL's scheme, user and password
  std::string master_name;
  int db = 0;
  bool tls = false;
  // The URL with the password hidden, for messages.
  std::string redacted;
};

bool is_sentinel_url(std::string_view text);
// Throws Error(k_exit_config) naming what is wrong; never shows the password.
SentinelUrl parse_sentinel_url(std::string_view text);

std::unique_ptr<Redis> make_sentinel_redis(const SentinelUrl& url, const ConnectOptions& options);

}  // namespace rlock
