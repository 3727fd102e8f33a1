// "A Redis", as the lock protocol sees it. A single server is one implementation; Sentinel,
// Cluster and Redlock are others, so the protocol's scripts and commands are the same on each.
// Only Redlock's several independent nodes change what a lock operation means (a quorum):
// make_lock() (lock.h) chooses that kind of lock once, from node_count().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redis/connection.h"
#include "redis/redis_url.h"
#include "redis/reply.h"
#include "util/clock.h"
#include "util/duration.h"
#include "util/error.h"

namespace rlock {

// The code of an error reply (READONLY, OOM, NOPERM, WRONGTYPE ...): its first word, or, when
// Redis 6.x wrapped an error raised inside a script ("ERR Error running script ...: -READONLY
// ..."), the code within. Logic keyed on a code must go through this, not the reply's start.
std::string error_code(std::string_view error);

// A reply of a shape we did not expect, to WHAT ("TIME", "the acquire script").
Failure unexpected_reply(std::string_view what);

// For broadcast(): wait for the replies of every node.
inline constexpr size_t k_all_nodes = SIZE_MAX;

// How long the nodes still out once the verdict is known may be driven (Enough::Rest).
inline constexpr std::chrono::milliseconds k_send_grace{250};

// When a broadcast has heard enough (Redlock: the quorum's verdict is known). Without YES:
// once NEEDED nodes have replied. With YES, which says whether a reply is a yes (a node that
// was sent several commands said yes when any of its replies is one):
// once NEEDED nodes said yes, or so many said otherwise or failed that NEEDED yeses can no
// longer come. A "no" that came first must not end the wait while the yeses that make a quorum
// are still on their way (a master restarted without its data answers every renewal "not ours",
// as fast as the others answer yes).
// REST: what becomes of the nodes still out once the verdict is known, for up to GRACE.
struct Enough {
  enum class Rest {
    left,      // left at once: their replies are thrown away when they come (a renewal, a read)
    sent,      // after a yes, driven until what they were asked has gone out (a connection
               // being made, a TLS handshake): an acquire
    answered,  // their replies awaited too: a release (a connection that was closed under it
               // fails only when its reply is read)
  };
  size_t needed = k_all_nodes;
  std::function<bool(const Reply&)> yes;
  Rest rest = Rest::left;
  Millis grace = k_send_grace;
};

// The server's clock in ms since the epoch from a TIME reply; nothing when it is not one.
std::optional<int64_t> server_time_ms(const Reply& time);

// A connection of one's own to one server, for SUBSCRIBE, which takes a connection over.
struct OwnConnection {
  std::unique_ptr<Connection> connection;  // started; up once its first command is answered
  int db = 0;        // the database its URL selects: keyspace channels name it
  std::string name;  // the server (a redacted URL): which keys share it
};

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
  // The same for the error reply to COMMAND: an ACL denial names the command and its key, as
  // the scripts' denials name theirs (denied_in_script).
  Failure server_failure(const std::string& error, const Argv& command) const;
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
  // replies, or why it gave none. Returns as soon as it has heard ENOUGH: a node that has not
  // replied by then is a failure for this call (exchange(), exchange.h).
  virtual std::vector<Result<std::vector<Reply>>> broadcast(const std::vector<Argv>& commands,
                                                            TimePoint deadline,
                                                            const std::vector<bool>& to = {},
                                                            const Enough& enough = {});
  // Runs F on each server that holds a share of the keys, for SCAN: this one, or every master
  // of a Cluster (and of each Redlock node).
  virtual Result<Unit> for_each_primary(const std::function<Result<Unit>(Redis&)>& f,
                                        TimePoint deadline);
  // A new connection to the server that holds KEY (a Cluster's master of its slot, the primary
  // Sentinel names), for keyspace notifications, which that server alone sends. Redlock's
  // nodes each hold a copy: no one server does, and this fails (kind protocol).
  virtual Result<OwnConnection> own_connection(const std::string& key, TimePoint deadline);
  // The name of the server that commands about KEY go to now (OwnConnection::name of the one
  // own_connection() would give), as far as this Redis knows without asking; "" when it
  // does not know (Sentinel's primary forgotten after a failure). Keyspace notifications
  // come from that server alone: a subscriber elsewhere (the old primary of a failover)
  // must subscribe again.
  virtual std::string server_of(const std::string& /*key*/) { return name(); }
  // How long a blocking call (BLPOP) should block at most, so that the next one goes where
  // the server is now: behind Sentinel, a primary that is no longer one may still answer
  // (and keep a blocked client) for seconds after a failover. Nothing: as long as it likes.
  virtual std::optional<Millis> blocking_slice() const { return std::nullopt; }
  // Whether another server may take over this one's keys (a Sentinel's replica promoted, a
  // Cluster's): a write refused meanwhile is worth asking again for seconds, where against
  // one server that refuses connections it is not.
  virtual bool can_fail_over() const { return false; }
};

// One server at SEEDS' only URL, or a Redis Cluster reached through any of SEEDS (one URL's
// addresses, parse_redis_seeds): a MOVED reply, or with several seeds the slot map read before
// the first command, switches to routing by hash slot. Connects lazily and reconnects after a
// failure, on the next call.
std::unique_ptr<Redis> make_single_redis(const std::vector<RedisUrl>& seeds,
                                         const ConnectOptions& options);

// A Lua script, sent by SHA1 (EVALSHA) so steady-state calls carry 40 bytes, not the source.
// Both lie in read-only data: the build embeds the text and hashes it (scripts.h).
class Script {
public:
  constexpr Script(std::string_view source, std::string_view sha1) : source_(source), sha1_(sha1) {}
  std::string_view source() const { return source_; }
  std::string_view sha1() const { return sha1_; }

private:
  std::string_view source_;
  std::string_view sha1_;
};

// EVALSHA, and EVAL when the server answers NOSCRIPT (restarted, flushed, or a new server).
Result<Reply> eval(Redis& redis, const Script& script, const Argv& keys, const Argv& args,
                   TimePoint deadline);
// An error reply to SCRIPT as a Failure, naming what an ACL denied.
Failure script_failure(const Redis& redis, const Script& script, const Argv& keys,
                       const std::string& error);
// What an ACL denial ERROR of SCRIPT, run with KEYS, was of, for the message ("the ACL user may
// not run TIME, which rlock's scripts call"; "... key patterns must allow every key of this
// lock: ..."), in any server's wording; nothing for other errors.
std::optional<std::string> denied_in_script(const Script& script, const Argv& keys,
                                            std::string_view error);
// A script to run, with its keys and arguments.
struct ScriptCall {
  const Script* script;
  Argv keys;
  Argv args;
  // Sent with its source (EVAL): an end of run sent again after a lost reply is, so that a
  // delivery that a frozen or restarted server runs late, after its scripts were flushed,
  // still runs. The first goes by SHA1, as every script does (no script text per run).
  bool with_source = false;
};
// eval() of CALL.
Result<Reply> eval(Redis& redis, const ScriptCall& call, TimePoint deadline);
// eval() with THEN, scripts on keys of the script's hash slot, sent after it in the same round
// trip: the script's reply followed by THEN's (error replies to THEN are Replies). An error
// reply to the script is a Failure, as with eval().
Result<std::vector<Reply>> eval_then(Redis& redis, const Script& script, const Argv& keys,
                                     const Argv& args, const std::vector<ScriptCall>& then,
                                     TimePoint deadline);
// eval() on every node of REDIS at once (Redlock): each node's reply, or why it gave none.
// An error reply is a Failure of kind server, as with eval(). Returns once it has heard ENOUGH
// (the caller's rule: Redlock's quorum); the others count as failed.
std::vector<Result<Reply>> eval_on_all(Redis& redis, const Script& script, const Argv& keys,
                                       const Argv& args, TimePoint deadline, const Enough& enough);

}  // namespace rlock
