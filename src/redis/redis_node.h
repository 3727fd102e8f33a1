// One Redis server: the building block of every topology (redis.h). Connects lazily, and after
// a failure drops the connection so that the next call makes a new one.
#pragma once

#include <memory>

#include "redis/connection.h"
#include "redis/redis.h"

namespace rlock {

class NodeRedis final : public Redis {
public:
  NodeRedis(RedisUrl url, ConnectOptions options)
      : url_(std::move(url)), options_(std::move(options)) {}

  Result<std::vector<Reply>> pipeline(const std::vector<Argv>& commands,
                                      TimePoint deadline) override;
  Result<Reply> blocking_call(const Argv& argv, TimePoint deadline, int interrupt_fd) override;
  // blocking_call() of COMMANDS' last, the others (ASKING) sent before it in the same round
  // trip: the last one's reply, an error reply as a Reply.
  Result<Reply> blocking_send(const std::vector<Argv>& commands, TimePoint deadline,
                              int interrupt_fd);
  Result<OwnConnection> own_connection(const std::string& key, TimePoint deadline) override;
  std::string name() const override { return url_.redacted(); }
  Millis command_timeout() const override { return options_.command_timeout; }

  // The connection to use now, for exchange(): the one there is, or a new one (started, not
  // yet up) when there is none, or it was closed while idle, or it has owed replies for longer
  // than the command timeout (the server is as good as dead).
  Result<Connection*> connection();
  // After a failure: the next call makes a new connection.
  void drop() { conn_.reset(); }

  const RedisUrl& url() const { return url_; }
  const ConnectOptions& options() const { return options_; }

private:
  RedisUrl url_;
  ConnectOptions options_;
  std::unique_ptr<Connection> conn_;
};

}  // namespace rlock
