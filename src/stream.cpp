#include "stream.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

namespace rlock {

Result<Unit> wait_fd(int fd, short events, TimePoint deadline, const std::string& what,
                     int interrupt_fd) {
  for (;;) {
    pollfd p[2] = {{fd, events, 0}, {interrupt_fd, POLLIN, 0}};
    int n = ::poll(p, interrupt_fd >= 0 ? 2 : 1, millis_until(deadline));
    if (n > 0 && p[0].revents) return Unit{};
    if (n > 0) return Failure{Failure::Kind::interrupted, what + ": interrupted"};
    if (n == 0) return Failure{Failure::Kind::timeout, what + ": timed out"};
    if (errno != EINTR) return Failure{Failure::Kind::io, what + ": " + errno_message("poll")};
  }
}

namespace {

class PlainStream final : public Stream {
public:
  PlainStream(Fd fd, std::string endpoint) : fd_(std::move(fd)), endpoint_(std::move(endpoint)) {}

  int socket() const override { return fd_.get(); }

  Result<Unit> write_all(const std::string& bytes, TimePoint deadline) override {
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = ::send(fd_.get(), bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
      if (n > 0) {
        done += static_cast<size_t>(n);
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        auto ready = wait_fd(fd_.get(), POLLOUT, deadline, endpoint_);
        if (!ready) return ready.failure();
      } else if (errno != EINTR) {
        return Failure{Failure::Kind::io, endpoint_ + ": " + errno_message("send")};
      }
    }
    return Unit{};
  }

  Result<size_t> read_some(char* buf, size_t len, TimePoint deadline, int interrupt_fd) override {
    for (;;) {
      ssize_t n = ::recv(fd_.get(), buf, len, 0);
      if (n >= 0) return static_cast<size_t>(n);
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        auto ready = wait_fd(fd_.get(), POLLIN, deadline, endpoint_, interrupt_fd);
        if (!ready) return ready.failure();
      } else if (errno != EINTR) {
        return Failure{Failure::Kind::io, endpoint_ + ": " + errno_message("recv")};
      }
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
