// From options to "a Redis": which URL, and which implementation serves it.
#include <cstdlib>

#include "error.h"
#include "redis.h"
#include "redis_url.h"
#include "verbs.h"

namespace rlock {

std::unique_ptr<Redis> connect_redis(const GlobalOptions& global) {
  std::string url_text = k_default_redis_url;
  if (!global.redis_urls.empty()) {
    if (global.redis_urls.size() > 1)
      throw Error(k_exit_config, "several --redis URLs (Redlock) are not supported yet");
    url_text = global.redis_urls.front();
  } else if (const char* env = std::getenv("RLOCK_REDIS_URL"); env && *env) {
    url_text = env;
  }
  return make_single_redis(parse_redis_url(url_text));
}

}  // namespace rlock
