// TLS for rediss:// with OpenSSL, which Debian's hiredis 0.14 lacks. libssl is loaded with
// dlopen(3) the first time a TLS connection is made: linked in, loading libssl and libcrypto
// made every `rlock run k -- true` 1.0-1.2 ms slower, nearly as much again as all else rlock
// adds (bench/ab.py, docs/PERFORMANCE.md), and most runs use plain TCP or a unix socket.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "redis/stream.h"

namespace rlock {

// redis-cli's names: --cacert, --cacertdir, --cert, --key, --sni.
struct TlsOptions {
  std::string cacert;     // CA bundle; the system's CAs when neither this nor cacertdir is set
  std::string cacertdir;  // directory of hashed CA certificates
  std::string cert;       // client certificate (mutual TLS)
  std::string key;        // its private key
  std::string sni;        // server name to send and verify; default: the URL's host
};

// Wraps FD (connected to HOST) in TLS; the handshake, which verifies the server's certificate
// and name, is the stream's handshake(). Unusable TLS material is Error(k_exit_config); a failed
// handshake or verification is a Failure of kind connect whose message says so.
std::unique_ptr<Stream> make_tls_stream(Fd fd, const std::string& host, const std::string& endpoint,
                                        const TlsOptions& options);

// "OpenSSL 3.0.x ..." of the libssl that rediss:// would use, or nullopt when it cannot load.
std::optional<std::string> tls_library_version();

}  // namespace rlock
