#include "redis.h"

#include "connection.h"
#include "sha1.h"

namespace rlock {

namespace {

class SingleRedis final : public Redis {
public:
  explicit SingleRedis(RedisUrl url) : url_(std::move(url)) {}

  Result<Reply> call(const Argv& argv, TimePoint deadline) override {
    if (!conn_) {
      auto opened = Connection::open(url_, deadline);
      if (!opened) return opened.failure();
      conn_ = std::move(*opened);
    }
    auto reply = conn_->call(argv, deadline);
    if (!reply) {
      conn_.reset();  // a failed connection is dead; the next call makes a new one
      return reply.failure();
    }
    if (reply->type == Reply::Type::error) return Failure{Failure::Kind::server, reply->str};
    return reply;
  }

  std::string name() const override { return url_.redacted(); }

private:
  RedisUrl url_;
  std::unique_ptr<Connection> conn_;
};

}  // namespace

std::unique_ptr<Redis> make_single_redis(const RedisUrl& url) {
  return std::make_unique<SingleRedis>(url);
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
      reply.failure().message.rfind("NOSCRIPT", 0) == 0) {
    argv[0] = "EVAL";
    argv[1] = script.source();
    reply = redis.call(argv, deadline);
  }
  return reply;
}

}  // namespace rlock
