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

struct redisReader;

namespace rlock {

inline constexpr std::chrono::milliseconds k_default_connect_timeout{2000};

class Connection {
public:
  // Connects, then AUTH and SELECT as the URL asks, all before DEADLINE.
  static Result<std::unique_ptr<Connection>> open(const RedisUrl& url, TimePoint deadline);
  ~Connection();

  // Sends every command in one write and reads their replies in order. An error reply is a
  // Reply of type error here; I/O failures and timeouts are Failures, after which this
  // connection is dead.
  Result<std::vector<Reply>> pipeline(const std::vector<Argv>& commands, TimePoint deadline);
  Result<Reply> call(const Argv& argv, TimePoint deadline);

private:
  Connection(Fd fd, std::string endpoint);
  Result<Unit> write_all(const std::string& bytes, TimePoint deadline);
  Result<Reply> read_reply(TimePoint deadline);
  Failure fail(Failure::Kind kind, const std::string& what);

  Fd fd_;
  std::string endpoint_;  // for messages; never holds a password
  std::unique_ptr<redisReader, void (*)(redisReader*)> reader_;
};

}  // namespace rlock
