#include "settings/connect.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "redis/credentials.h"
#include "redis/redis.h"
#include "redis/redis_url.h"
#include "redis/redlock.h"
#include "redis/sentinel.h"
#include "util/error.h"
#include "util/log.h"
#include "util/trusted_file.h"

namespace rlock {

namespace {

// A password file is read for each new connection; at the start it is checked once, so that a
// file that is missing or empty is a configuration error before anything is done. Like ssh
// with a private key, a file others can read earns a warning (not a refusal: the operator may
// have reasons).
void check_password_file(const std::string& path) {
  auto password = read_password_file(path);
  if (!password) throw Error(k_exit_config, password.failure().message);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;
  std::string others = file_access(path, st).read_by_others;
  if (!others.empty())
    log_warning("the password file " + path + " can be read by others (" + others +
                "); chmod 600 it");
}

}  // namespace

std::unique_ptr<Redis> connect_redis(const GlobalOptions& global, bool again) {
  std::vector<std::string> texts = global.redis_urls;
  if (texts.empty()) texts.push_back(k_default_redis_url);
  // Under cron or systemd nothing names a Redis unless a config file does, and every host then
  // locks in its own: the job runs everywhere, silently. Said even with -q (cron lines use it);
  // on a terminal the person typing sees where they are, and inside an rlock run (RLOCK_KEY
  // set) the outer rlock has said it already.
  if (global.redis_url_is_default && !again && !::isatty(STDERR_FILENO) &&
      !std::getenv("RLOCK_KEY"))
    log(Level::alert, {"default_redis", "",
                       "no Redis configured (--redis, RLOCK_REDIS_URL, or redis in a config file "
                       "such as /etc/rlock/config.toml): using this host's " +
                           texts.front() + ", which other hosts do not see"});
  const ConnectOptions& options = global.connect;
  bool checked = again;  // a second Redis of the same process: checked and said once
  auto password = [&](bool url_has_one) {
    if (!options.password.file || url_has_one || checked) return;
    check_password_file(*options.password.file);
    checked = true;
  };
  if (texts.size() == 1 && is_sentinel_url(texts.front())) {
    SentinelUrl url = parse_sentinel_url(texts.front());
    password(url.sentinels.front().password.has_value());
    return make_sentinel_redis(url, options);
  }
  std::vector<RedisUrl> urls;
  for (const auto& text : texts) {
    if (is_sentinel_url(text))
      throw Error(k_exit_config,
                  "a Sentinel URL cannot be one of several Redlock nodes: give it alone");
    std::vector<RedisUrl> seeds = parse_redis_seeds(text);
    password(seeds.front().password.has_value());
    if (texts.size() == 1) return make_single_redis(seeds, options);
    if (seeds.size() > 1)
      throw Error(k_exit_config, "a Cluster's seeds (" + redact_url_text(text) +
                                     ") cannot be one of several Redlock nodes: give it alone");
    urls.push_back(seeds.front());
  }
  return make_redlock_redis(urls, options);
}

}  // namespace rlock
