// What every Redis shares (call(), the one-server defaults of the interface, the server's clock
// read from TIME) and NodeRedis, one server: its connection, kept between calls and replaced
// after a failure.
#include "redis/redis.h"

#include <charconv>

#include "redis/connection.h"
#include "redis/proxy.h"
#include "redis/redis_node.h"

namespace rlock {

Result<Reply> Redis::call(const Argv& argv, TimePoint deadline) {
  auto replies = pipeline({argv}, deadline);
  if (!replies) return replies.failure();
  Reply& reply = replies->front();
  if (reply.type == Reply::Type::error) return server_failure(reply.str, argv);
  return std::move(reply);
}

std::optional<int64_t> server_time_ms(const Reply& time) {
  if (!time.is_array() || time.elements.size() != 2) return std::nullopt;
  int64_t parts[2];
  for (int i = 0; i < 2; ++i) {
    const std::string& digits = time.elements[i].str;
    auto [end, err] = std::from_chars(digits.data(), digits.data() + digits.size(), parts[i]);
    if (err != std::errc() || end != digits.data() + digits.size() || digits.empty())
      return std::nullopt;
  }
  return parts[0] * 1000 + parts[1] / 1000;
}

std::vector<Result<std::vector<Reply>>> Redis::broadcast(const std::vector<Argv>& commands,
                                                         TimePoint deadline,
                                                         const std::vector<bool>& to,
                                                         const Enough&) {
  if (!to.empty() && !to[0]) return {std::vector<Reply>{}};
  return {pipeline(commands, deadline)};
}

Result<OwnConnection> Redis::own_connection(const std::string&, TimePoint) {
  return Failure{Failure::Kind::protocol, name() + ": no one server holds a key"};
}

Result<Unit> Redis::for_each_primary(const std::function<Result<Unit>(Redis&)>& f, TimePoint) {
  return f(*this);
}

Result<Connection*> NodeRedis::connection() {
  // Closed while idle (a server's `timeout`, a proxy's idle limit): a new connection at once,
  // rather than a failed command and a warning for what is no trouble.
  // Late replies that a quorum did not wait for are read first (a failure kills the
  // connection): behind them may be the end of a connection closed while idle.
  bool caught_up = conn_ && conn_->owing_since() && conn_->advance(0) && !conn_->owing_since();
  if (conn_ && conn_->closed_while_idle(caught_up)) conn_.reset();
  if (conn_ && conn_->owing_since() &&
      Clock::now() - *conn_->owing_since() > options_.command_timeout)
    conn_.reset();
  if (!conn_) {
    auto started = Connection::start(url_, options_);
    if (!started) return started.failure();
    conn_ = std::move(*started);
  }
  return conn_.get();
}

Result<std::vector<Reply>> NodeRedis::pipeline(const std::vector<Argv>& commands,
                                               TimePoint deadline) {
  auto conn = connection();
  if (!conn) return conn.failure();
  auto replies = (*conn)->pipeline(commands, deadline);
  if (!replies) {
    drop();  // a failed connection is dead; the next call makes a new one
    return name_refused_command(*this, commands, replies.failure());
  }
  return replies;
}

Result<Reply> NodeRedis::blocking_send(const std::vector<Argv>& commands, TimePoint deadline,
                                       int interrupt_fd) {
  auto conn = connection();
  if (!conn) return conn.failure();
  auto replies = (*conn)->pipeline(commands, deadline, interrupt_fd);
  if (!replies) {
    drop();
    return replies.failure();
  }
  return std::move(replies->back());
}

Result<Reply> NodeRedis::blocking_call(const Argv& argv, TimePoint deadline, int interrupt_fd) {
  auto reply = blocking_send({argv}, deadline, interrupt_fd);
  if (reply && reply->type == Reply::Type::error) return server_failure(reply->str);
  return reply;
}

Result<OwnConnection> NodeRedis::own_connection(const std::string&, TimePoint) {
  auto started = Connection::start(url_, options_);
  if (!started) return started.failure();
  return OwnConnection{std::move(*started), url_.db, name()};
}

}  // namespace rlock
