// "A Redis", as the lock protocol sees it. A single server is one implementation; Sentinel,
// Cluster and Redlock are others, so the protocol never branches on topology.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "clock.h"
#include "connection.h"
#include "duration.h"
#include "error.h"
#include "redis_url.h"
#include "reply.h"

namespace rlock {

class Redis {
public:
  virtual ~Redis() = default;
  // Sends COMMANDS in one round trip and returns their replies in order; error replies are
  // Replies of type error here, not Failures.
  virtual Result<std::vector<Reply>> pipeline(const std::vector<Argv>& commands,
                                              TimePoint deadline) = 0;
  // Runs one command. An error reply (WRONGTYPE, NOSCRIPT ...) is a Failure of kind server.
  Result<Reply> call(const Argv& argv, TimePoint deadline);
  // Runs a command that blocks on the server (BLPOP). When INTERRUPT_FD becomes readable first,
  // fails with kind interrupted (and the connection is replaced).
  virtual Result<Reply> blocking_call(const Argv& argv, TimePoint deadline, int interrupt_fd) = 0;
  // ERROR (a server's error reply) as a Failure naming this Redis, with a hint for the errors
  // operators meet (NOAUTH, READONLY, OOM).
  Failure server_failure(const std::string& error) const;
  // What to call this Redis in messages: a redacted URL.
  virtual std::string name() const = 0;
  // How long one command may take when the caller has no tighter deadline.
  virtual Millis command_timeout() const = 0;

  // Redlock: the independent masters behind this Redis, to be asked the same thing at once
  // (broadcast) and believed by quorum. One for everything else: a server, a Sentinel-managed
  // primary, a Cluster.
  virtual size_t node_count() const { return 1; }
  virtual Redis& node(size_t) { return *this; }
  // Sends COMMANDS to every node (or those TO marks) at once, in one round trip: each node's
  // replies, or why it gave none.
  virtual std::vector<Result<std::vector<Reply>>> broadcast(const std::vector<Argv>& commands,
                                                            TimePoint deadline,
                                                            const std::vector<bool>& to = {});
  // Runs F on each server that holds a share of the keys, for SCAN: this one, or every master
  // of a Cluster (and of each Redlock node).
  virtual Result<Unit> for_each_primary(const std::function<Result<Unit>(Redis&)>& f,
                                        TimePoint deadline);
};

// One server at URL, or a Redis Cluster reached through it: a MOVED reply switches to routing
// by hash slot. Connects lazily and reconnects after a failure, on the next call.
std::unique_ptr<Redis> make_single_redis(const RedisUrl& url, const ConnectOptions& options);

// A Lua script, sent by SHA1 (EVALSHA) so steady-state calls carry 40 bytes, not the source.
// The SHA1 is computed on first use: a run needs three of the scripts, not all of them.
class Script {
public:
  explicit Script(std::string source) : source_(std::move(source)) {}
  const std::string& source() const { return source_; }
  const std::string& sha1() const;  // thread-safe

private:
  std::string source_;
  mutable std::once_flag sha1_once_;
  mutable std::string sha1_;
};

// EVALSHA, and EVAL when the server answers NOSCRIPT (restarted, flushed, or a new server).
Result<Reply> eval(Redis& redis, const Script& script, const Argv& keys, const Argv& args,
                   TimePoint deadline);
// eval() on every node of REDIS at once (Redlock): each node's reply, or why it gave none.
// An error reply is a Failure of kind server, as with eval().
std::vector<Result<Reply>> eval_on_all(Redis& redis, const Script& script, const Argv& keys,
                                       const Argv& args, TimePoint deadline);

}  // namespace rlock
