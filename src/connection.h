// One connection to one Redis server. hiredis is only the RESP codec here (command formatting and
// the reply reader); the bytes travel over a socket this class owns, so every connect, write and
// read has a deadline and a dead server can never hang rlock.
#pragma once

#include <chrono>
#include <memory>

#include "clock.h"
#include "error.h"
#include "fd.h"
#include "redis_url.h"
#include "reply.h"
#include "stream.h"
#include "tls.h"

struct redisReader;

namespace rlock {

// A dead or black-holed server must never hang rlock: every connect and command has one of
// these unless --connect-timeout / --command-timeout say otherwise.
inline constexpr std::chrono::milliseconds k_default_connect_timeout{2000};
inline constexpr std::chrono::milliseconds k_default_command_timeout{3000};

// A connection unused this long is looked at before the next command (closed_while_idle):
// start-up's few commands never pay for the look.
inline constexpr std::chrono::milliseconds k_idle_check_after{500};

struct ConnectOptions {
  TlsOptions tls;                       // for rediss://
  std::optional<std::string> password;  // used when the URL carries none
  std::chrono::milliseconds connect_timeout = k_default_connect_timeout;
  std::chrono::milliseconds command_timeout = k_default_command_timeout;
};

class Connection {
public:
  // Connects (TCP, unix socket or TLS), then AUTH and SELECT as URL and OPTIONS ask, within
  // the connect timeout and before DEADLINE.
  static Result<std::unique_ptr<Connection>>
  open(const RedisUrl& url, const ConnectOptions& options, TimePoint deadline);
  ~Connection();

  // Sends every command in one write and reads their replies in order. An error reply is a
  // Reply of type error here; I/O failures and timeouts are Failures, after which this
  // connection is dead.
  // INTERRUPT_FD (if not -1): give up, dropping the connection, when it becomes readable.
  Result<std::vector<Reply>> pipeline(const std::vector<Argv>& commands, TimePoint deadline,
                                      int interrupt_fd = -1);
  // pipeline() in two halves, so that one caller can have commands in flight on several
  // connections at once (Redlock, Cluster): send to each, then receive from each.
  Result<Unit> send(const std::vector<Argv>& commands, TimePoint deadline);
  Result<std::vector<Reply>> receive(size_t count, TimePoint deadline, int interrupt_fd = -1);

  // Whether the server (or a proxy, a load balancer) closed this connection while it was idle,
  // which many do after a while: the next command would fail for nothing. Looked at only after
  // k_idle_check_after without a command. Nothing is read.
  bool closed_while_idle() const;

private:
  Connection(std::unique_ptr<Stream> stream, std::string endpoint);
  Result<Reply> read_reply(TimePoint deadline, int interrupt_fd);
  Failure fail(const Failure& failure);

  std::unique_ptr<Stream> stream_;  // null once an I/O error has made the connection unusable
  std::string endpoint_;            // for messages; never holds a password
  std::unique_ptr<redisReader, void (*)(redisReader*)> reader_;
  TimePoint last_reply_ = Clock::now();  // when the last reply came: idle since then
};

}  // namespace rlock
