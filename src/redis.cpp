#include "redis.h"

#include "connection.h"
#include "sha1.h"

namespace rlock {

namespace {

class SingleRedis final : public Redis {
public:
  SingleRedis(RedisUrl url, ConnectOptions options)
      : url_(std::move(url)), options_(std::move(options)) {}

  Result<std::vector<Reply>> pipeline(const std::vector<Argv>& commands,
                                      TimePoint deadline) override {
    return run(commands, deadline, -1);
  }

  Result<Reply> blocking_call(const Argv& argv, TimePoint deadline, int interrupt_fd) override {
    auto replies = run({argv}, deadline, interrupt_fd);
    if (!replies) return replies.failure();
    if (replies->front().type == Reply::Type::error) return server_failure(replies->front().str);
    return std::move(replies->front());
  }

  std::string name() const override { return url_.redacted(); }
  Millis command_timeout() const override { return options_.command_timeout; }

private:
  Result<std::vector<Reply>> run(const std::vector<Argv>& commands, TimePoint deadline,
                                 int interrupt_fd) {
    if (!conn_) {
      auto opened = Connection::open(url_, options_, deadline);
      if (!opened) return opened.failure();
      conn_ = std::move(*opened);
    }
    auto replies = conn_->pipeline(commands, deadline, interrupt_fd);
    if (!replies) conn_.reset();  // a failed connection is dead; the next call makes a new one
    return replies;
  }

  RedisUrl url_;
  ConnectOptions options_;
  std::unique_ptr<Connection> conn_;
};

// What to do about the server errors an operator is likely to meet.
const char* hint_for(const std::string& code) {
  if (code == "NOAUTH")
    return "give the password in the URL, RLOCK_PASSWORD, REDISCLI_AUTH or --password-file";
  if (code == "WRONGPASS") return "the user or password is wrong";
  if (code == "READONLY") return "this is a read-only replica: point --redis at the primary";
  if (code == "OOM")
    return "Redis reached maxmemory and evicts nothing: free memory or raise maxmemory";
  if (code == "NOPERM") return "the ACL user may not run this command or touch this key";
  if (code == "MASTERDOWN") return "the replica lost its primary";
  return nullptr;
}

}  // namespace

Result<Reply> Redis::call(const Argv& argv, TimePoint deadline) {
  auto replies = pipeline({argv}, deadline);
  if (!replies) return replies.failure();
  Reply& reply = replies->front();
  if (reply.type == Reply::Type::error) return server_failure(reply.str);
  return std::move(reply);
}

Failure Redis::server_failure(const std::string& error) const {
  std::string code = error.substr(0, error.find(' '));
  // A server that wants a password cuts off long commands from a client that gave none, before
  // it would say NOAUTH.
  if (error.find("unauthenticated") != std::string::npos) code = "NOAUTH";
  std::string message = name() + ": " + error;
  if (const char* hint = hint_for(code)) message += " (" + std::string(hint) + ")";
  return Failure{Failure::Kind::server, message, code};
}

std::unique_ptr<Redis> make_single_redis(const RedisUrl& url, const ConnectOptions& options) {
  return std::make_unique<SingleRedis>(url, options);
}

const std::string& Script::sha1() const {
  std::call_once(sha1_once_, [this] { sha1_ = sha1_hex(source_); });
  return sha1_;
}

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
