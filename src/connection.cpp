#include "connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <hiredis/hiredis.h>

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

std::string format_command(const Argv& argv) {
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  ptrs.reserve(argv.size());
  lens.reserve(argv.size());
  for (const auto& a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  char* cmd = nullptr;
  int len = redisFormatCommandArgv(&cmd, static_cast<int>(argv.size()), ptrs.data(), lens.data());
  if (len < 0) throw std::bad_alloc();
  std::unique_ptr<char, void (*)(char*)> owner(cmd, redisFreeCommand);
  return std::string(cmd, static_cast<size_t>(len));
}

// A non-blocking connect to one address, finished before DEADLINE.
Result<Fd> connect_to(const sockaddr* addr, socklen_t len, int family, TimePoint deadline,
                      const std::string& endpoint) {
  Fd fd(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Failure{Failure::Kind::io, errno_message("socket")};
  if (::connect(fd.get(), addr, len) != 0) {
    if (errno != EINPROGRESS && errno != EAGAIN)
      return Failure{Failure::Kind::io,
                     "cannot connect to " + endpoint + ": " + std::strerror(errno)};
    auto ready = wait_fd(fd.get(), POLLOUT, deadline, endpoint);
    if (!ready)
      return Failure{ready.failure().kind, "cannot connect to " + endpoint + ": timed out"};
    int err = 0;
    socklen_t errlen = sizeof err;
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &errlen);
    if (err != 0)
      return Failure{Failure::Kind::io,
                     "cannot connect to " + endpoint + ": " + std::strerror(err)};
  }
  if (family != AF_UNIX) {
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  return fd;
}

Result<Fd> connect_socket(const RedisUrl& url, TimePoint deadline) {
  std::string endpoint = url.endpoint();
  if (url.scheme == RedisUrl::Scheme::unix_socket) {
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    if (url.path.size() >= sizeof sa.sun_path)
      return Failure{Failure::Kind::io, "unix socket path too long: " + url.path};
    std::memcpy(sa.sun_path, url.path.c_str(), url.path.size() + 1);
    return connect_to(reinterpret_cast<sockaddr*>(&sa), sizeof sa, AF_UNIX, deadline, endpoint);
  }
  // An address given as numbers needs no resolver: getaddrinfo() costs a cold start ~15 µs.
  sockaddr_in v4{};
  if (::inet_pton(AF_INET, url.host.c_str(), &v4.sin_addr) == 1) {
    v4.sin_family = AF_INET;
    v4.sin_port = htons(static_cast<uint16_t>(url.port));
    return connect_to(reinterpret_cast<sockaddr*>(&v4), sizeof v4, AF_INET, deadline, endpoint);
  }
  sockaddr_in6 v6{};
  if (::inet_pton(AF_INET6, url.host.c_str(), &v6.sin6_addr) == 1) {
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(static_cast<uint16_t>(url.port));
    return connect_to(reinterpret_cast<sockaddr*>(&v6), sizeof v6, AF_INET6, deadline, endpoint);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::string port = std::to_string(url.port);
  int rc = ::getaddrinfo(url.host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0)
    return Failure{Failure::Kind::io, "cannot resolve " + url.host + ": " + gai_strerror(rc)};
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> owner(res, freeaddrinfo);
  Failure last{Failure::Kind::io, "cannot connect to " + endpoint};
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    auto fd = connect_to(ai->ai_addr, ai->ai_addrlen, ai->ai_family, deadline, endpoint);
    if (fd) return fd;
    last = fd.failure();
    if (last.kind == Failure::Kind::timeout) break;
  }
  return last;
}

}  // namespace

Connection::Connection(std::unique_ptr<Stream> stream, std::string endpoint)
    : stream_(std::move(stream)), endpoint_(std::move(endpoint)),
      reader_(redisReaderCreate(), redisReaderFree) {
  if (!reader_) throw std::bad_alloc();
}

Connection::~Connection() = default;

Result<std::unique_ptr<Connection>>
Connection::open(const RedisUrl& url, const ConnectOptions& options, TimePoint deadline) {
  deadline = std::min(deadline, Clock::now() + options.connect_timeout);
  auto fd = connect_socket(url, deadline);
  if (!fd) return Failure{Failure::Kind::connect, fd.failure().message};
  std::unique_ptr<Stream> stream;
  if (url.scheme == RedisUrl::Scheme::tls) {
    auto tls = make_tls_stream(std::move(*fd), url.host, url.endpoint(), options.tls, deadline);
    if (!tls) return tls.failure();
    stream = std::move(*tls);
  } else {
    stream = make_plain_stream(std::move(*fd), url.endpoint());
  }
  std::unique_ptr<Connection> conn(new Connection(std::move(stream), url.endpoint()));
  std::vector<Argv> setup;
  const std::optional<std::string>& password = url.password ? url.password : options.password;
  if (password) {
    if (url.user)
      setup.push_back({"AUTH", *url.user, *password});
    else
      setup.push_back({"AUTH", *password});
  }
  if (url.db != 0) setup.push_back({"SELECT", std::to_string(url.db)});
  if (!setup.empty()) {
    auto replies = conn->pipeline(setup, deadline);
    if (!replies) return Failure{Failure::Kind::connect, replies.failure().message};
    for (const Reply& r : *replies)
      if (r.type == Reply::Type::error) {
        std::string code = r.str.substr(0, r.str.find(' '));
        std::string hint = code == "WRONGPASS" ? " (the user or password is wrong)" : "";
        // AUTH with a user name came with ACLs, in Redis 6.0.
        if (url.user && r.str.find("wrong number of arguments") != std::string::npos)
          hint = " (an ACL user needs Redis 6.0 or later)";
        return Failure{Failure::Kind::server, url.redacted() + ": " + r.str + hint, code};
      }
  }
  return conn;
}

Failure Connection::fail(const Failure& failure) {
  stream_.reset();  // the stream is out of step now; no later call may read a stale reply
  return failure;
}

Result<Reply> Connection::read_reply(TimePoint deadline, int interrupt_fd) {
  for (;;) {
    void* raw = nullptr;
    if (redisReaderGetReply(reader_.get(), &raw) != REDIS_OK)
      return fail({Failure::Kind::protocol, endpoint_ + ": bad reply from server"});
    if (raw) {
      ReplyPtr reply(static_cast<redisReply*>(raw), freeReplyObject);
      last_reply_ = Clock::now();
      return copy_reply(reply.get());
    }
    char buf[16384];
    auto n = stream_->read_some(buf, sizeof buf, deadline, interrupt_fd);
    if (!n) return fail(n.failure());
    if (*n == 0) return fail({Failure::Kind::io, endpoint_ + ": connection closed by server"});
    if (redisReaderFeed(reader_.get(), buf, *n) != REDIS_OK)
      return fail({Failure::Kind::protocol, endpoint_ + ": bad reply from server"});
  }
}

Result<Unit> Connection::send(const std::vector<Argv>& commands, TimePoint deadline) {
  if (!stream_) return Failure{Failure::Kind::io, endpoint_ + ": connection is closed"};
  std::string out;
  for (const Argv& argv : commands) out += format_command(argv);
  auto written = stream_->write_all(out, deadline);
  if (!written) return fail(written.failure());
  return Unit{};
}

Result<std::vector<Reply>> Connection::receive(size_t count, TimePoint deadline, int interrupt_fd) {
  if (!stream_) return Failure{Failure::Kind::io, endpoint_ + ": connection is closed"};
  std::vector<Reply> replies;
  replies.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    auto reply = read_reply(deadline, interrupt_fd);
    if (!reply) return reply.failure();
    replies.push_back(std::move(*reply));
  }
  return replies;
}

bool Connection::closed_while_idle() const {
  if (!stream_) return true;
  if (Clock::now() - last_reply_ < k_idle_check_after) return false;
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
