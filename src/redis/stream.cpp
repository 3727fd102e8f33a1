#include "redis/stream.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

namespace rlock {

namespace {

class PlainStream final : public Stream {
public:
  PlainStream(Fd fd, std::string endpoint) : fd_(std::move(fd)), endpoint_(std::move(endpoint)) {}

  int socket() const override { return fd_.get(); }

  Result<Step> write_some(const char* bytes, size_t len) override {
    for (;;) {
      ssize_t n = ::send(fd_.get(), bytes, len, MSG_NOSIGNAL);
      if (n >= 0) return Step{static_cast<size_t>(n), 0};
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Step{0, POLLOUT};
      if (errno != EINTR)
        return Failure{Failure::Kind::io, endpoint_ + ": " + errno_message("send")};
    }
  }

  Result<Step> read_some(char* buf, size_t len) override {
    for (;;) {
      ssize_t n = ::recv(fd_.get(), buf, len, 0);
      if (n >= 0) return Step{static_cast<size_t>(n), 0};
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Step{0, POLLIN};
      if (errno != EINTR)
        return Failure{Failure::Kind::io, endpoint_ + ": " + errno_message("recv")};
    }
  }

private:
  Fd fd_;
  std::string endpoint_;
};

}  // namespace

std::unique_ptr<Stream> make_plain_stream(Fd fd, std::string endpoint) {
  return std::make_unique<PlainStream>(std::move(fd), std::move(endpoint));
}

}  // namespace rlock
