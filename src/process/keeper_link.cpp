#include "process/keeper_link.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "util/clock.h"
#include "util/sha1.h"

namespace rlock {

namespace {

// "\0rlock-keeper/" and the token's SHA-1: an abstract address, LENGTH bytes long.
socklen_t address_of(const std::string& token, sockaddr_un* sa) {
  std::memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  std::string name = std::string(1, '\0') + "rlock-keeper/";
  Sha1Hex hash = sha1_hex(token);
  name.append(hash.data(), hash.size());
  std::memcpy(sa->sun_path, name.data(), name.size());
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
}

}  // namespace

Fd listen_for_release(const std::string& token) {
  Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return fd;
  sockaddr_un sa;
  socklen_t len = address_of(token, &sa);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), len) != 0 || ::listen(fd.get(), 4) != 0)
    return Fd();
  return fd;
}

Fd stop_request(int listening, const std::string& key) {
  Fd peer(::accept4(listening, nullptr, nullptr, SOCK_CLOEXEC));
  if (!peer.valid()) return Fd();
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(peer.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return Fd();
  if (cred.uid != ::geteuid() && cred.uid != 0) return Fd();
  // The key comes in one write, right after the connect.
  std::string got(key.size() + 1, '\0');
  pollfd p{peer.get(), POLLIN, 0};
  if (::poll(&p, 1, 1000) <= 0) return Fd();
  ssize_t n = ::read(peer.get(), got.data(), got.size());
  if (n != static_cast<ssize_t>(key.size()) || got.compare(0, key.size(), key) != 0) return Fd();
  return peer;
}

void acknowledge(const Fd& request) { (void)write_all(request.get(), "k", 1); }

bool tell_keeper(const std::string& token, const std::string& key, Millis timeout) {
  Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return false;
  sockaddr_un sa;
  socklen_t len = address_of(token, &sa);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), len) != 0) return false;
  if (!write_all(fd.get(), key.data(), key.size())) return false;
  // The keeper answers once it has stopped renewing; it exits right after.
  pollfd p{fd.get(), POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
  char ack = 0;
  return ::read(fd.get(), &ack, 1) == 1 && ack == 'k';
}

}  // namespace rlock
