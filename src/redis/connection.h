// One connection to one Redis server. hiredis is only the RESP codec here (command formatting and
// the reply reader); the bytes travel over a socket this class owns, so every connect, write and
// read has a deadline and a dead server can never hang rlock.
#pragma once

#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "redis/credentials.h"
#include "redis/redis_url.h"
#include "redis/reply.h"
#include "redis/stream.h"
#include "redis/tls.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/fd.h"

struct redisReader;

namespace rlock {

// A dead or black-holed server must never hang rlock: every connect and command has one of
// these unless --connect-timeout / --command-timeout say otherwise.
inline constexpr std::chrono::milliseconds k_default_connect_timeout{2000};
inline constexpr std::chrono::milliseconds k_default_command_timeout{3000};

// The most bytes of replies a connection holds unread: replies, or one reply, that come to
// more are another program's data under rlock's keys (rlock writes nothing so large, and reads
// its own in pages), and reading them would let that program choose rlock's memory
// (docs/DESIGN.md, "Reads with a bound"). The connection fails instead, naming the bound.
inline constexpr size_t k_unread_most = 8 << 20;

// A connection unused this long is looked at before the next command (closed_while_idle):
// start-up's few commands never pay for the look.
inline constexpr std::chrono::milliseconds k_idle_check_after{500};

struct ConnectOptions {
  TlsOptions tls;           // for rediss://
  PasswordSource password;  // used when the URL carries none (credentials.h)
  std::chrono::milliseconds connect_timeout = k_default_connect_timeout;
  std::chrono::milliseconds command_timeout = k_default_command_timeout;
  // Where the settings came from, for the messages a wrong one causes (settings.cpp fills
  // them in): said after the address when it is rlock's default, and with WRONGPASS.
  std::string default_address;  // "127.0.0.1:6379" when no setting named one, else empty
  std::string password_origin;  // "the environment's REDISCLI_AUTH", or empty: none given
};

// A connection goes through its phases without blocking (advance()), so that one poll() can
// drive several at once (exchange(), exchange.h); the blocking calls (send, receive) drive
// one alone, with a deadline. Commands can be queued at once: they go out when the connection
// is up (connected, TLS handshake done, AUTH and SELECT answered).
class Connection {
public:
  // Starts connecting to URL: the password is fetched (a password file read, a password
  // command run: for each new connection, so that rotated credentials are current), the
  // address is resolved anew (getaddrinfo(3) blocks, for a host name: a name that moved to
  // another address at a failover is followed), and a non-blocking connect begins. The
  // connect timeout counts from here; AUTH and SELECT, as URL and OPTIONS ask, go first once
  // connected.
  static Result<std::unique_ptr<Connection>> start(const RedisUrl& url,
                                                   const ConnectOptions& options);
  ~Connection();

  // Sends every command in one write and reads their replies in order. An error reply is a
  // Reply of type error here; I/O failures and timeouts are Failures, after which this
  // connection is dead. A connection not yet up gets there first, within the connect timeout.
  // INTERRUPT_FD (if not -1): give up, dropping the connection, when it becomes readable.
  Result<std::vector<Reply>> pipeline(const std::vector<Argv>& commands, TimePoint deadline,
                                      int interrupt_fd = -1);
  // pipeline() in two halves.
  Result<Unit> send(const std::vector<Argv>& commands, TimePoint deadline);
  Result<std::vector<Reply>> receive(size_t count, TimePoint deadline, int interrupt_fd = -1);

  // Pub/sub, on a connection of its own (SUBSCRIBE takes it over: it serves no other command
  // afterwards). Subscribes to each of CHANNELS, one command each, and waits for the server's
  // confirmations; an error reply (an ACL that forbids a channel) is a Failure of kind server.
  Result<Unit> subscribe(const std::vector<std::string>& channels, TimePoint deadline);
  // The next message of the subscription, ["message", channel, payload], or nothing when none
  // came by DEADLINE: that is no failure, and the connection stays up (a DEADLINE that has
  // passed takes only what has arrived). A failure kills the connection, as with the others.
  Result<std::optional<Reply>> next_message(TimePoint deadline);

  // The same without blocking, for driving several connections from one poll(): queue()
  // commands, poll the socket for events(), advance() on what poll() said (or 0) until
  // replies() holds their replies, then take() them. A failure of advance() kills the
  // connection.
  void queue(const std::vector<Argv>& commands);
  int socket() const;
  short events() const;
  Result<Unit> advance(short revents);
  size_t replies() const { return inbox_.size(); }
  // Whether queued commands are still to be written (its connect, TLS handshake, AUTH and
  // SELECT go first).
  bool unsent() const { return !out_.empty(); }
  std::vector<Reply> take(size_t count);
  // Whether it is connected, its TLS handshake done, AUTH and SELECT answered.
  bool up() const { return phase_ == Phase::up; }
  // TLS: when the server's certificate expires (Stream::certificate_expiry), once connected.
  std::optional<int64_t> certificate_expiry() const {
    return stream_ ? stream_->certificate_expiry() : std::nullopt;
  }
  // DEADLINE, or the connect timeout's end when that comes first and the connection is not up.
  TimePoint deadline(TimePoint deadline) const;
  // When poll() must return at the latest: deadline(DEADLINE), or sooner when the handshake
  // waits with a bound of its own (Stream::wake_at); advance(0) then, unless deadline() passed.
  TimePoint wake_at(TimePoint deadline) const;
  // What to say when deadline() has passed (it depends on how far the connection got); the
  // caller then kills the connection (kill()) or abandons what it asked.
  Failure timed_out() const;
  // The caller no longer waits for the replies to what it queued. The commands still go out
  // (a node that answers late still acts, and gets the undo or the release behind them), and
  // their replies will be read and thrown away before those of the next commands, so that a
  // late reply is never taken for the answer to a later command. Returns the failure to
  // report for them.
  Failure abandon();
  // Since when replies that abandon() threw away are awaited; nothing when none are.
  std::optional<TimePoint> owing_since() const { return owing_since_; }
  // Makes the connection unusable: its socket is closed.
  void kill();

  // Whether the server (or a proxy, a load balancer) closed this connection while it was idle,
  // which many do after a while: the next command would fail for nothing. Looked at only after
  // k_idle_check_after without a command, unless CAUGHT_UP (the late replies that abandon()
  // left were read just now, which is not a command). Nothing is read.
  bool closed_while_idle(bool caught_up = false) const;
  // When the last reply (or message of a subscription) came, or the connection started: idle
  // since then.
  TimePoint last_heard() const { return last_reply_; }

private:
  enum class Phase { connecting, handshaking, setting_up, up, dead };
  // Commands formatted for the wire, as queued together; written in one call (a retry after a
  // partial write gives OpenSSL the same bytes again, as it requires).
  struct Batch {
    std::string bytes;
    size_t commands;
    bool setup;  // AUTH and SELECT: written before any other, which wait for their replies
  };
  struct Address {
    sockaddr_storage addr;
    socklen_t len;
  };

  Connection(const RedisUrl& url, const ConnectOptions& options,
             const std::optional<std::string>& password);
  Result<Unit> connect_next(Failure last);
  void connected(Fd fd);
  Result<Unit> flush();
  Result<Unit> read_replies();
  Result<Unit> take_reply(Reply reply);
  bool awaiting() const;
  template <class Done> Result<Unit> drive(Done done, TimePoint deadline, int interrupt_fd);
  Failure fail(Failure failure);

  Phase phase_ = Phase::connecting;
  std::unique_ptr<Stream> stream_;  // once connected; null again when the connection died
  Fd connecting_;                   // the socket while its connect is under way
  std::vector<Address> addresses_;  // those left to try (getaddrinfo's order), last first
  TimePoint connect_deadline_;
  bool tcp_;                     // not a unix socket
  std::string endpoint_;         // for messages; never holds a password
  std::string unreachable_;      // the same, said to be rlock's default when it is
  std::string redacted_;         // the URL, for messages about AUTH and SELECT
  bool with_user_;               // AUTH names an ACL user
  std::string password_origin_;  // ConnectOptions::password_origin, or "the URL"
  std::string tls_host_;         // empty for no TLS
  TlsOptions tls_;
  short handshake_wait_ = 0;    // what the TLS handshake waits for
  short write_wait_ = POLLOUT;  // and the last write or read that could not go on: TLS may
  short read_wait_ = POLLIN;    // need to read in order to write, and the other way round

  std::deque<Batch> out_;  // the first set-up's (when setting up), then the commands'
  size_t written_ = 0;     // bytes of out_.front() written
  size_t setup_left_ = 0;  // replies to AUTH and SELECT still to come
  size_t unanswered_ = 0;  // commands queued whose replies did not come yet
  size_t discard_ = 0;     // the first of them, abandoned: their replies are thrown away
  std::optional<TimePoint> owing_since_;
  std::vector<Reply> inbox_;  // replies not yet taken
  size_t unread_bytes_ = 0;   // read from the server since the caller last took a reply
  // subscribe(): the server may send at any time, so there is always something to read, and
  // what it sends unasked (messages) is kept apart from the replies to commands.
  bool subscribed_ = false;
  std::deque<Reply> messages_;
  std::unique_ptr<redisReader, void (*)(redisReader*)> reader_;
  TimePoint last_reply_ = Clock::now();  // when the last reply came: idle since then
};

}  // namespace rlock
