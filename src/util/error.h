// Two kinds of failure. Expected ones ("Redis timed out", "lock busy") are values: Failure inside
// a Result. What ends the program is an Error carrying its exit status, thrown up to main().
#pragma once

#include <cerrno>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

#include "util/exit_status.h"

namespace rlock {

class Error : public std::runtime_error {
public:
  Error(int exit_status, const std::string& message)
      : std::runtime_error(message), exit_status_(exit_status) {}
  int exit_status() const { return exit_status_; }
  // The lock it befell, when one: main() says it first ("rlock: error: KEY: ...").
  const std::string& key() const { return key_; }
  void set_key(const std::string& key) {
    if (key_.empty()) key_ = key;
  }

private:
  int exit_status_;
  std::string key_;
};

// A usage error: bad flag or value on the command line (exit 64).
inline Error usage_error(const std::string& message) { return Error(k_exit_usage, message); }

// "CALL: strerror(errno)", as ninja names a failed system call.
inline std::string errno_message(const std::string& call, int err = errno) {
  return call + ": " + std::strerror(err);
}

struct Failure {
  enum class Kind {
    connect,      // no connection could be made: nothing was sent
    io,           // reset or closed after sending: the command may or may not have run
    timeout,      // no answer in time: the connection is dead too (but see Why::late)
    server,       // Redis answered with an error reply (WRONGTYPE, NOAUTH, READONLY ...)
    protocol,     // an answer we cannot understand
    interrupted,  // a signal arrived while blocked (BLPOP): the connection was dropped
  };
  // rlock's own reasons, which the kind alone does not tell.
  enum class Why {
    none,
    too_few_replicas,  // --min-replicas: fewer replicas acknowledged the lock in time
    unknown_primary,   // the sentinels know no primary of that name
    tls_refused,       // the TLS handshake failed: certificate, CA, protocol (not a timeout)
    late,              // Redlock: no reply yet when a quorum had answered; the node may still
                       // act on what was sent (Connection::abandon)
    closed,            // the other end closed the connection before any reply to what was
                       // asked: a server going down, an idle timeout, or a proxy that does not
                       // pass one of the commands (twemproxy closes the connection at them)
    refused_command,   // a proxy does not pass a command rlock needs (name_refused_command):
                       // asking again will not change it
    out_of_resources,  // rlock's own process ran out of descriptors, processes or memory
                       // (util/resources.h): not Redis's doing, exit 125, never retried
  };
  Kind kind;
  std::string message;
  std::string code = {};  // server errors: the reply's first word (NOSCRIPT, READONLY, OOM ...)
  Why why = Why::none;
};

// [[nodiscard]]: a failure dropped unread is a bug; (void) says it was meant.
template <class T> class [[nodiscard]] Result {
public:
  Result(T value) : v_(std::move(value)) {}
  Result(Failure failure) : v_(std::move(failure)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() { return std::get<0>(v_); }
  const T& value() const { return std::get<0>(v_); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Failure& failure() const { return std::get<1>(v_); }

private:
  std::variant<T, Failure> v_;
};

struct Unit {};

}  // namespace rlock
