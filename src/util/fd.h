// An owned file descriptor: closed exactly once, on every path. And the two ways rlock moves
// bytes through a plain descriptor: all of a buffer out, a small file in.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <string>
#include <utility>

namespace rlock {

class Fd {
public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

private:
  int fd_ = -1;
};

// Writes all LEN bytes of DATA to FD, through short writes and EINTR; false (errno set) when
// FD refuses. No allocation: the command's side of a clone of rlock (child.cpp) calls it.
inline bool write_all(int fd, const void* data, size_t len) {
  auto* p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = ::write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

// What is left to read from FD, read with plain system calls (no stdio); nothing when it
// cannot be read (errno set), or is larger than LIMIT bytes (errno EFBIG).
inline std::optional<std::string> read_rest(int fd, size_t limit) {
  std::string text;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (text.size() + static_cast<size_t>(n) > limit) {
      errno = EFBIG;
      return std::nullopt;
    }
    if (n == 0) return text;
    text.append(buf, static_cast<size_t>(n));
  }
}

// The text of a small file (/proc, /etc); nothing when it is missing, unreadable, or larger
// than LIMIT bytes.
inline std::optional<std::string> read_small_file(const char* path, size_t limit) {
  Fd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return std::nullopt;
  return read_rest(fd.get(), limit);
}

}  // namespace rlock
