// A byte stream to a Redis server with deadlines on every operation: a plain socket (TCP or
// unix) or TLS over one. The connection above it speaks RESP and never sees which.
#pragma once

#include <memory>
#include <string>

#include "clock.h"
#include "error.h"
#include "fd.h"

namespace rlock {

class Stream {
public:
  virtual ~Stream() = default;
  // Writes all of BYTES before DEADLINE.
  virtual Result<Unit> write_all(const std::string& bytes, TimePoint deadline) = 0;
  // Reads what is there (at least one byte) before DEADLINE; 0 means the peer closed. When
  // INTERRUPT_FD (if not -1) becomes readable first, fails with kind interrupted.
  virtual Result<size_t> read_some(char* buf, size_t len, TimePoint deadline, int interrupt_fd) = 0;
  // The socket underneath, for looking at it without reading.
  virtual int socket() const = 0;
};

// Waits until FD is ready for EVENTS (poll(2) flags) or DEADLINE passes, or INTERRUPT_FD (if
// not -1) becomes readable.
Result<Unit> wait_fd(int fd, short events, TimePoint deadline, const std::string& what,
                     int interrupt_fd = -1);

// The socket as it is: bytes go straight to send(2) and recv(2).
std::unique_ptr<Stream> make_plain_stream(Fd fd, std::string endpoint);

}  // namespace rlock
