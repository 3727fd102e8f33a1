// A byte stream to a Redis server: a plain socket (TCP or unix) or TLS over one. The connection
// above it speaks RESP and never sees which. Every call does what the socket allows now and
// never blocks, so that one poll() can drive many streams at once (Redlock's nodes); the
// connection does the waiting, with a deadline.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "util/clock.h"
#include "util/error.h"
#include "util/fd.h"

namespace rlock {

// What one non-blocking call did: BYTES moved; or none, and WAIT is the poll(2) event it waits
// for (POLLIN or POLLOUT: TLS may need either, whichever way the bytes go). A read that moved
// nothing and waits for nothing met the end of the stream.
struct Step {
  size_t bytes = 0;
  short wait = 0;
};

class Stream {
public:
  virtual ~Stream() = default;
  // The stream's own opening (TLS: the handshake), taken as far as the socket allows: 0 once
  // it is done, else the event it waits for. Its failures are of kind connect.
  virtual Result<short> handshake() { return 0; }
  // While the handshake waits for something that may never come (TLS: the server's word on
  // our certificate), when to call handshake() again all the same; nothing otherwise.
  virtual std::optional<TimePoint> wake_at() const { return std::nullopt; }
  // TLS: when the server's certificate expires (its notAfter, in seconds since the epoch), once
  // the handshake is done; nothing otherwise.
  virtual std::optional<int64_t> certificate_expiry() const { return std::nullopt; }
  virtual Result<Step> write_some(const char* bytes, size_t len) = 0;
  virtual Result<Step> read_some(char* buf, size_t len) = 0;
  // The socket underneath, to poll, or to look at without reading.
  virtual int socket() const = 0;
};

// The socket as it is: bytes go straight to send(2) and recv(2).
std::unique_ptr<Stream> make_plain_stream(Fd fd, std::string endpoint);

}  // namespace rlock
