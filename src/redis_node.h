// One Redis server: the building block of every topology (redis.h). Connects lazily, and after
// a failure drops the connection so that the next call makes a new one.
#pragma once

#include <memory>

#include "connection.h"
#include "redis.h"

namespace rlock {

class NodeRedis final : public Redis {
public:
  NodeRedis(RedisUrl url, ConnectOptions options)
      : url_(std::move(url)), options_(std::move(options)) {}

  Result<std::vector<Reply>> pipeline(const std::vector<Argv>& commands,
                                      TimePoint deadline) override;
  Result<Reply> blocking_call(const Argv& argv, TimePoint deadline, int interrupt_fd) override;
  std::string name() const override { return url_.redacted(); }
  Millis command_timeout() const override { return options_.command_timeout; }

  // pipeline() in halves, to have commands in flight on several servers at once.
  Result<Unit> send(const std::vector<Argv>& commands, TimePoint deadline);
  Result<std::vector<Reply>> receive(size_t count, TimePoint deadline, int interrupt_fd = -1);

  const RedisUrl& url() const { return url_; }
  const ConnectOptions& options() const { return options_; }

private:
  RedisUrl url_;
  ConnectOptions options_;
  std::unique_ptr<Connection> conn_;
};

// Sends each node its commands, then reads every node's replies: one round trip for all.
// NODES[i] gets COMMANDS[i]; an empty list skips the node.
std::vector<Result<std::vector<Reply>>> exchange(const std::vector<NodeRedis*>& nodes,
                                                 const std::vector<std::vector<Argv>>& commands,
                                                 TimePoint deadline);

}  // namespace rlock
