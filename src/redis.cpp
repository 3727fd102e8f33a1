#include "redis.h"

#include "connection.h"
#include "sha1.h"

namespace rlock {

namespace {

class SingleRedis final : public Redis {
public:
  SingleRedis(RedisUrl url, ConnectOptions options)
      : url_(std::move(url)), options_(std::move(options)) {}

  Result<Reply> call(const Argv& argv, TimePoint deadline) override {
    if (!conn_) {
      auto opened = Connection::open(url_, options_, deadline);
      if (!opened) return opened.failure();
      conn_ = std::move(*opened);
    }
    auto reply = conn_->call(argv, deadline);
    if (!reply) {
      conn_.reset();  // a failed connection is dead; the next call makes a new one
      return reply.failure();
    }
    if (reply->type == Reply::Type::error) {
      std::string message = reply->str;
      std::string code = message.substr(0, message.find(' '));
      if (code == "NOAUTH")
        message += " (give the password in the URL, RLOCK_PASSWORD, REDISCLI_AUTH or "
                   "--password-file)";
      return Failure{Failure::Kind::server, url_.redacted() + ": " + message, code};
    }
    return reply;
  }

  std::string name() const override { return url_.redacted(); }
  Millis command_timeout() const override { return options_.command_timeout; }

private:
  RedisUrl url_;
  ConnectOptions options_;
  std::unique_ptr<Connection> conn_;
};

}  // namespace

std::unique_ptr<Redis> make_single_redis(const RedisUrl& url, const ConnectOptions& options) {
  return std::make_unique<SingleRedis>(url, options);
}

Script::Script(std::string source) : source_(std::move(source)), sha1_(sha1_hex(source_)) {}

Result<Reply> eval(Redis& redis, const Script& script, const Argv& keys, const Argv& args,
                   TimePoint deadline) {
  Argv argv;
  argv.reserve(3 + keys.size() + args.size());
  argv.push_back("EVALSHA");
  argv.push_back(script.sha1());
  argv.push_back(std::to_string(keys.size()));
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  auto reply = redis.call(argv, deadline);
  if (!reply && reply.failure().kind == Failure::Kind::server &&
      reply.failure().code == "NOSCRIPT") {
    argv[0] = "EVAL";
    argv[1] = script.source();
    reply = redis.call(argv, deadline);
  }
  return reply;
}

}  // namespace rlock
