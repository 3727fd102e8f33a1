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

// After FAILURE to COMMANDS sent to NODE, when the other end closed the connection before any
// reply (Why::closed): which command made it close, found by sending each kind of command
// that can go without effect (one that only reads; XADD with ID 0-0, which Redis refuses;
// EVALSHA of no script) alone on a connection of its own, after a PING that must pass (a
// proxy whose server is down closes every connection at once). A proxy that does not pass a command
// (twemproxy) closes the connection at it: the failure then names it, and what rlock needs it
// for (Why::refused_command). Else FAILURE as it was: a server gone down, an idle timeout.
Failure name_refused_command(NodeRedis& node, const std::vector<Argv>& commands, Failure failure);

// Sends each node its commands and reads their replies, all nodes at once from one poll():
// connects, TLS handshakes, writes and reads overlap, so the slowest node, not the sum of
// them, sets the time. NODES[i] gets COMMANDS[i]; an empty list skips the node. Returns once
// it has heard ENOUGH (Redlock: the quorum's verdict), or every node has replied or failed, or
// DEADLINE passed; a node that has not replied by then is a failure for this call, and its
// connection throws the late replies away (Connection::abandon).
std::vector<Result<std::vector<Reply>>> exchange(const std::vector<NodeRedis*>& nodes,
                                                 const std::vector<std::vector<Argv>>& commands,
                                                 TimePoint deadline, const Enough& enough = {});

}  // namespace rlock
