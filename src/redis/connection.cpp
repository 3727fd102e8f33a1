#include "redis/connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <hiredis/hiredis.h>

#include "util/resources.h"

namespace rlock {

namespace {

using ReplyPtr = std::unique_ptr<redisReply, void (*)(void*)>;

Reply copy_reply(const redisReply* r) {
  Reply out;
  switch (r->type) {
  case REDIS_REPLY_NIL: out.type = Reply::Type::nil; break;
  case REDIS_REPLY_INTEGER:
    out.type = Reply::Type::integer;
    out.integer = r->integer;
    break;
  case REDIS_REPLY_STRING:
    out.type = Reply::Type::string;
    out.str.assign(r->str, r->len);
    break;
  case REDIS_REPLY_STATUS:
    out.type = Reply::Type::status;
    out.str.assign(r->str, r->len);
    break;
  case REDIS_REPLY_ERROR:
    out.type = Reply::Type::error;
    out.str.assign(r->str, r->len);
    break;
  case REDIS_REPLY_ARRAY:
    out.type = Reply::Type::array;
    out.elements.reserve(r->elements);
    for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(copy_reply(r->element[i]));
    break;
  }
  return out;
}

// "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n": ARGV in RESP, as redisFormatCommandArgv() writes it,
// appended to OUT. Written here rather than by hiredis, whose sprintf() per argument was a
// sixth of what `rlock list` spent at 50,000 locks.
void append_command(std::string& out, const Argv& argv) {
  auto header = [&out](char kind, size_t n) {
    char digits[24];
    auto end = std::to_chars(digits, digits + sizeof digits, n).ptr;
    out += kind;
    out.append(digits, end);
    out += "\r\n";
  };
  header('*', argv.size());
  for (const auto& a : argv) {
    header('$', a.size());
    out += a;
    out += "\r\n";
  }
}

}  // namespace

Connection::Connection(const RedisUrl& url, const ConnectOptions& options,
                       const std::optional<std::string>& password)
    : connect_deadline_(Clock::now() + options.connect_timeout),
      tcp_(url.scheme != RedisUrl::Scheme::unix_socket), endpoint_(url.endpoint()),
      unreachable_(url.endpoint() == options.default_address
                       ? url.endpoint() + " (rlock's default, as no --redis, RLOCK_REDIS_URL or "
                                          "config file's redis names one)"
                       : url.endpoint()),
      redacted_(url.redacted()), with_user_(url.user.has_value()),
      password_origin_(url.password ? "the URL" : options.password_origin),
      tls_host_(url.scheme == RedisUrl::Scheme::tls ? url.host : ""), tls_(options.tls),
      reader_(redisReaderCreate(), redisReaderFree) {
  if (!reader_) throw std::bad_alloc();
  std::vector<Argv> setup;
  if (password) {
    if (url.user)
      setup.push_back({"AUTH", *url.user, *password});
    else
      setup.push_back({"AUTH", *password});
  }
  if (url.db != 0) setup.push_back({"SELECT", std::to_string(url.db)});
  if (!setup.empty()) {
    Batch& b = out_.emplace_back(Batch{"", setup.size(), true});
    for (const Argv& argv : setup) append_command(b.bytes, argv);
    setup_left_ = setup.size();
  }
}

Connection::~Connection() = default;

Result<std::unique_ptr<Connection>> Connection::start(const RedisUrl& url,
                                                      const ConnectOptions& options) {
  std::optional<std::string> password = url.password;
  if (!password) {
    auto fetched = fetch_password(options.password, options.connect_timeout);
    if (!fetched) return fetched.failure();
    password = std::move(*fetched);
  }
  std::unique_ptr<Connection> conn(new Connection(url, options, password));
  auto add = [&](const void* addr, size_t len) {
    Address& a = conn->addresses_.emplace_back();
    std::memcpy(&a.addr, addr, len);
    a.len = static_cast<socklen_t>(len);
  };
  sockaddr_un un{};
  sockaddr_in v4{};
  sockaddr_in6 v6{};
  if (url.scheme == RedisUrl::Scheme::unix_socket) {
    un.sun_family = AF_UNIX;
    if (url.path.size() >= sizeof un.sun_path)
      return Failure{Failure::Kind::connect, "unix socket path too long: " + url.path};
    std::memcpy(un.sun_path, url.path.c_str(), url.path.size() + 1);
    add(&un, sizeof un);
  } else if (::inet_pton(AF_INET, url.host.c_str(), &v4.sin_addr) == 1) {
    // An address given as numbers needs no resolver: getaddrinfo() costs a cold start ~15 µs.
    v4.sin_family = AF_INET;
    v4.sin_port = htons(static_cast<uint16_t>(url.port));
    add(&v4, sizeof v4);
  } else if (::inet_pton(AF_INET6, url.host.c_str(), &v6.sin6_addr) == 1) {
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(static_cast<uint16_t>(url.port));
    add(&v6, sizeof v6);
  } else {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    std::string port = std::to_string(url.port);
    int rc = ::getaddrinfo(url.host.c_str(), port.c_str(), &hints, &res);
    if (rc != 0)
      return Failure{Failure::Kind::connect,
                     "cannot resolve " + url.host + ": " + gai_strerror(rc)};
    std::unique_ptr<addrinfo, void (*)(addrinfo*)> owner(res, freeaddrinfo);
    for (addrinfo* ai = res; ai; ai = ai->ai_next) add(ai->ai_addr, ai->ai_addrlen);
  }
  std::reverse(conn->addresses_.begin(), conn->addresses_.end());  // tried from the back
  auto begun =
      conn->connect_next({Failure::Kind::connect, "cannot connect to " + conn->unreachable_});
  if (!begun) return begun.failure();
  return conn;
}

Result<Unit> Connection::connect_next(Failure last) {
  while (!addresses_.empty()) {
    Address a = addresses_.back();
    addresses_.pop_back();
    Fd fd(::socket(a.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid())
      return fail(system_call_failure("cannot open a connection to Redis at " + endpoint_, "socket",
                                      errno));
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&a.addr), a.len) == 0) {
      connected(std::move(fd));
      return Unit{};
    }
    if (errno == EINPROGRESS || errno == EAGAIN) {
      connecting_ = std::move(fd);
      return Unit{};
    }
    last = {Failure::Kind::connect,
            "cannot connect to " + unreachable_ + ": " + std::strerror(errno)};
  }
  return fail(last);
}

void Connection::connected(Fd fd) {
  if (tcp_) {
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  if (!tls_host_.empty()) {
    stream_ = make_tls_stream(std::move(fd), tls_host_, endpoint_, tls_);
    phase_ = Phase::handshaking;
  } else {
    stream_ = make_plain_stream(std::move(fd), endpoint_);
    phase_ = setup_left_ > 0 ? Phase::setting_up : Phase::up;
  }
}

int Connection::socket() const {
  if (phase_ == Phase::connecting) return connecting_.get();
  return stream_ ? stream_->socket() : -1;
}

short Connection::events() const {
  switch (phase_) {
  case Phase::connecting: return POLLOUT;
  case Phase::handshaking: return handshake_wait_;
  case Phase::setting_up:
  case Phase::up: {
    short events = 0;
    if (!out_.empty() && (phase_ == Phase::up || out_.front().setup)) events |= write_wait_;
    if (awaiting()) events |= read_wait_;
    return events;
  }
  case Phase::dead: break;
  }
  return 0;
}

bool Connection::awaiting() const {
  if (phase_ == Phase::setting_up) return setup_left_ > 0;
  return phase_ == Phase::up && (unanswered_ > 0 || subscribed_);
}

TimePoint Connection::deadline(TimePoint deadline) const {
  if (phase_ == Phase::up || phase_ == Phase::dead) return deadline;
  return std::min(deadline, connect_deadline_);
}

TimePoint Connection::wake_at(TimePoint deadline) const {
  TimePoint at = this->deadline(deadline);
  if (phase_ == Phase::handshaking)
    if (auto wake = stream_->wake_at()) at = std::min(at, *wake);
  return at;
}

Failure Connection::timed_out() const {
  switch (phase_) {
  case Phase::connecting:
    return {Failure::Kind::connect, "cannot connect to " + unreachable_ + ": timed out"};
  case Phase::handshaking:
    return {Failure::Kind::connect,
            "TLS handshake with " + endpoint_ + " failed: " + endpoint_ + ": timed out"};
  case Phase::setting_up: return {Failure::Kind::connect, endpoint_ + ": timed out"};
  case Phase::up:
  case Phase::dead: break;
  }
  return {Failure::Kind::timeout, endpoint_ + ": timed out"};
}

void Connection::queue(const std::vector<Argv>& commands) {
  if (commands.empty()) return;
  Batch& b = out_.emplace_back(Batch{"", commands.size(), false});
  for (const Argv& argv : commands) append_command(b.bytes, argv);
  unanswered_ += commands.size();
}

std::vector<Reply> Connection::take(size_t count) {
  count = std::min(count, inbox_.size());
  std::vector<Reply> out(std::make_move_iterator(inbox_.begin()),
                         std::make_move_iterator(inbox_.begin() + static_cast<ptrdiff_t>(count)));
  inbox_.erase(inbox_.begin(), inbox_.begin() + static_cast<ptrdiff_t>(count));
  if (inbox_.empty()) unread_bytes_ = 0;
  return out;
}

Failure Connection::abandon() {
  inbox_.clear();
  unread_bytes_ = 0;
  discard_ = unanswered_;
  if (discard_ > 0 && !owing_since_) owing_since_ = Clock::now();
  return {up() ? Failure::Kind::timeout : Failure::Kind::connect,
          endpoint_ + ": no reply yet when a quorum of nodes had answered", "", Failure::Why::late};
}

void Connection::kill() {
  phase_ = Phase::dead;
  stream_.reset();
  connecting_.reset();
}

Failure Connection::fail(Failure failure) {
  // Before the connection is up nothing of the caller's was sent.
  if (phase_ != Phase::up && failure.kind != Failure::Kind::server)
    failure.kind = Failure::Kind::connect;
  kill();  // the stream is out of step now; no later call may read a stale reply
  return failure;
}

Result<Unit> Connection::advance(short revents) {
  if (phase_ == Phase::dead)
    return Failure{Failure::Kind::io, endpoint_ + ": connection is closed"};
  if (phase_ == Phase::connecting) {
    if (!(revents & (POLLOUT | POLLERR | POLLHUP))) return Unit{};
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(connecting_.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    Fd fd = std::move(connecting_);
    if (err != 0) {
      // The next address, if the name had several.
      auto next = connect_next({Failure::Kind::connect,
                                "cannot connect to " + unreachable_ + ": " + std::strerror(err)});
      if (!next || phase_ == Phase::connecting) return next;
    } else {
      connected(std::move(fd));
    }
  }
  if (phase_ == Phase::handshaking) {
    auto wait = stream_->handshake();
    if (!wait) return fail(wait.failure());
    handshake_wait_ = *wait;
    if (*wait) return Unit{};
    phase_ = setup_left_ > 0 ? Phase::setting_up : Phase::up;
    revents = 0;
  }
  // Reading is tried when poll() said so, or at once (REVENTS 0), which also finds what TLS
  // has decrypted already and poll() cannot see; not when the socket was only writable.
  bool read = revents == 0 || (revents & (read_wait_ | POLLERR | POLLHUP));
  for (;;) {
    Phase was = phase_;
    if (auto done = flush(); !done) return done;
    if (read)
      if (auto done = read_replies(); !done) return done;
    if (phase_ == was) return Unit{};  // else AUTH and SELECT were answered: the commands go now
  }
}

Result<Unit> Connection::flush() {
  while (!out_.empty() && (phase_ == Phase::up || out_.front().setup)) {
    Batch& b = out_.front();
    auto step = stream_->write_some(b.bytes.data() + written_, b.bytes.size() - written_);
    if (!step) return fail(step.failure());
    if (step->bytes == 0) {
      if (step->wait == 0) return fail({Failure::Kind::io, endpoint_ + ": connection closed"});
      write_wait_ = step->wait;
      return Unit{};
    }
    written_ += step->bytes;
    if (written_ == b.bytes.size()) {
      out_.pop_front();
      written_ = 0;
    }
  }
  return Unit{};
}

Result<Unit> Connection::read_replies() {
  while (awaiting()) {
    void* raw = nullptr;
    if (redisReaderGetReply(reader_.get(), &raw) != REDIS_OK)
      return fail({Failure::Kind::protocol, endpoint_ + ": bad reply from server"});
    if (raw) {
      ReplyPtr reply(static_cast<redisReply*>(raw), freeReplyObject);
      last_reply_ = Clock::now();
      if (auto taken = take_reply(copy_reply(reply.get())); !taken) return taken;
      continue;
    }
    char buf[16384];
    auto step = stream_->read_some(buf, sizeof buf);
    if (!step) return fail(step.failure());
    if (step->bytes == 0) {
      if (step->wait == 0)
        return fail({Failure::Kind::io, endpoint_ + ": connection closed by server", "",
                     inbox_.empty() && discard_ == 0 ? Failure::Why::closed : Failure::Why::none});
      read_wait_ = step->wait;
      return Unit{};
    }
    unread_bytes_ += step->bytes;
    if (unread_bytes_ > k_unread_most)
      return fail({Failure::Kind::protocol,
                   endpoint_ + ": a reply of more than " + std::to_string(k_unread_most >> 20) +
                       " MiB, which rlock never writes: another program's data under rlock's " +
                       "keys? (the read stopped there)"});
    if (redisReaderFeed(reader_.get(), buf, step->bytes) != REDIS_OK)
      return fail({Failure::Kind::protocol, endpoint_ + ": bad reply from server"});
  }
  return Unit{};
}

Result<Unit> Connection::take_reply(Reply reply) {
  if (setup_left_ > 0) {
    --setup_left_;
    if (reply.type == Reply::Type::error) {
      std::string code = reply.str.substr(0, reply.str.find(' '));
      std::string hint = code != "WRONGPASS"        ? ""
                         : password_origin_.empty() ? " (the user or password is wrong)"
                                                    : " (the user or password is wrong; the "
                                                      "password came from " +
                                                          password_origin_ + ")";
      // AUTH with a user name came with ACLs, in Redis 6.0.
      if (with_user_ && reply.str.find("wrong number of arguments") != std::string::npos)
        hint = " (an ACL user needs Redis 6.0 or later)";
      return fail({Failure::Kind::server, redacted_ + ": " + reply.str + hint, code});
    }
    if (setup_left_ == 0) phase_ = Phase::up;
    return Unit{};
  }
  // A message of a subscription is no reply: it may come between the confirmations.
  if (subscribed_ && reply.is_array() && reply.elements.size() >= 3 &&
      (reply.elements[0].str == "message" || reply.elements[0].str == "pmessage")) {
    messages_.push_back(std::move(reply));
    return Unit{};
  }
  --unanswered_;
  if (discard_ > 0) {
    if (--discard_ == 0) owing_since_.reset();
    return Unit{};
  }
  inbox_.push_back(std::move(reply));
  return Unit{};
}

template <class Done>
Result<Unit> Connection::drive(Done done, TimePoint deadline, int interrupt_fd) {
  short revents = 0;
  for (;;) {
    if (auto moved = advance(revents); !moved) return moved;
    if (done()) return Unit{};
    pollfd p[2] = {{socket(), events(), 0}, {interrupt_fd, POLLIN, 0}};
    int n = ::poll(p, interrupt_fd >= 0 ? 2 : 1, millis_until(wake_at(deadline)));
    if (n < 0 && errno != EINTR)
      return fail({Failure::Kind::io, endpoint_ + ": " + errno_message("poll")});
    if (n == 0 && Clock::now() >= this->deadline(deadline)) return fail(timed_out());
    if (n > 0 && !p[0].revents)
      return fail({Failure::Kind::interrupted, endpoint_ + ": interrupted"});
    revents = n > 0 ? p[0].revents : 0;
  }
}

Result<Unit> Connection::send(const std::vector<Argv>& commands, TimePoint deadline) {
  queue(commands);
  return drive([&] { return out_.empty(); }, deadline, -1);
}

Result<std::vector<Reply>> Connection::receive(size_t count, TimePoint deadline, int interrupt_fd) {
  auto got = drive([&] { return inbox_.size() >= count; }, deadline, interrupt_fd);
  if (!got) return got.failure();
  return take(count);
}

Result<Unit> Connection::subscribe(const std::vector<std::string>& channels, TimePoint deadline) {
  subscribed_ = true;
  std::vector<Argv> commands;
  for (const std::string& channel : channels) commands.push_back({"SUBSCRIBE", channel});
  auto confirmed = pipeline(commands, deadline);
  if (!confirmed) return confirmed.failure();
  for (const Reply& r : *confirmed)
    if (r.type == Reply::Type::error)
      return fail({Failure::Kind::server, endpoint_ + ": SUBSCRIBE: " + r.str,
                   r.str.substr(0, r.str.find(' '))});
  return Unit{};
}

Result<std::optional<Reply>> Connection::next_message(TimePoint deadline) {
  short revents = 0;
  for (;;) {
    if (auto moved = advance(revents); !moved) return moved.failure();
    if (!messages_.empty()) {
      std::optional<Reply> message(std::move(messages_.front()));
      messages_.pop_front();
      if (messages_.empty() && inbox_.empty()) unread_bytes_ = 0;
      return message;
    }
    pollfd p{socket(), events(), 0};
    int n = ::poll(&p, 1, millis_until(wake_at(deadline)));
    if (n < 0 && errno != EINTR)
      return fail({Failure::Kind::io, endpoint_ + ": " + errno_message("poll")});
    if (n == 0 && Clock::now() < this->deadline(deadline)) {
      revents = 0;  // a handshake's own bound (wake_at), not the deadline
      continue;
    }
    if (n == 0) {
      if (up()) return std::optional<Reply>();
      return fail(timed_out());
    }
    revents = n > 0 ? p.revents : 0;
  }
}

bool Connection::closed_while_idle(bool caught_up) const {
  if (phase_ == Phase::dead) return true;
  if (phase_ != Phase::up || unanswered_ > 0 || !out_.empty()) return false;
  if (!caught_up && Clock::now() - last_reply_ < k_idle_check_after) return false;
  // Between commands a Redis connection has nothing to say: anything readable (an end of
  // file, a reset, a TLS close_notify, an error) means the other end is gone.
  pollfd p{stream_->socket(), POLLIN | POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0;
}

Result<std::vector<Reply>> Connection::pipeline(const std::vector<Argv>& commands,
                                                TimePoint deadline, int interrupt_fd) {
  auto sent = send(commands, deadline);
  if (!sent) return sent.failure();
  return receive(commands.size(), deadline, interrupt_fd);
}

}  // namespace rlock
