#include "redis/tls.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <poll.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <ctime>

#include "util/duration.h"
#include "util/resources.h"

namespace rlock {

namespace {

// How long a TLS 1.3 handshake that asked for our certificate waits for the server's word on
// it (TlsStream::await_verdict): twice the handshake's own time, within these.
constexpr Millis k_verdict_floor{20};
constexpr Millis k_verdict_cap{500};

// The OpenSSL functions rlock calls, looked up in libssl (and, through it, libcrypto). Macros
// such as SSL_set_tlsext_host_name are spelled out with the functions they expand to.
#define RLOCK_OPENSSL_FUNCTIONS(X)                                                                 \
  X(TLS_client_method)                                                                             \
  X(SSL_CTX_new)                                                                                   \
  X(SSL_CTX_free)                                                                                  \
  X(SSL_CTX_ctrl)                                                                                  \
  X(SSL_CTX_set_verify)                                                                            \
  X(SSL_CTX_set_default_verify_paths)                                                              \
  X(SSL_CTX_load_verify_locations)                                                                 \
  X(SSL_CTX_use_certificate_chain_file)                                                            \
  X(SSL_CTX_use_PrivateKey_file)                                                                   \
  X(SSL_CTX_check_private_key)                                                                     \
  X(SSL_new)                                                                                       \
  X(SSL_free)                                                                                      \
  X(SSL_ctrl)                                                                                      \
  X(SSL_set_fd)                                                                                    \
  X(SSL_set1_host)                                                                                 \
  X(SSL_get0_param)                                                                                \
  X(SSL_connect)                                                                                   \
  X(SSL_read)                                                                                      \
  X(SSL_peek)                                                                                      \
  X(SSL_write)                                                                                     \
  X(SSL_get_error)                                                                                 \
  X(SSL_get_verify_result)                                                                         \
  X(SSL_set_msg_callback)                                                                          \
  X(SSL_version)                                                                                   \
  X(SSL_get1_peer_certificate)                                                                     \
  X(X509_get0_notAfter)                                                                            \
  X(X509_free)                                                                                     \
  X(ASN1_TIME_to_tm)                                                                               \
  X(X509_VERIFY_PARAM_set1_ip_asc)                                                                 \
  X(X509_verify_cert_error_string)                                                                 \
  X(ERR_get_error)                                                                                 \
  X(ERR_peek_error)                                                                                \
  X(ERR_error_string_n)                                                                            \
  X(ERR_reason_error_string)                                                                       \
  X(ERR_clear_error)                                                                               \
  X(OpenSSL_version)

struct OpenSsl {
#define RLOCK_DECLARE(name) decltype(&::name) name = nullptr;
  RLOCK_OPENSSL_FUNCTIONS(RLOCK_DECLARE)
#undef RLOCK_DECLARE
  std::string error;   // why loading failed; empty when it worked
  int load_errno = 0;  // why dlopen failed, when out of descriptors or memory: no missing library

  // The library, loaded once per process (the renewal thread may be the first to need it).
  static const OpenSsl& get() {
    static const OpenSsl instance = load();
    return instance;
  }

private:
  static OpenSsl load() {
    OpenSsl ssl;
    void* handle = ::dlopen("libssl.so.3", RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      ssl.error = ::dlerror();
      // dlerror() gives the failed open's errno only as text: "...: Too many open files".
      for (int err : {EMFILE, ENFILE, ENOMEM})
        if (ssl.error.ends_with(std::strerror(err))) ssl.load_errno = err;
      return ssl;
    }
#define RLOCK_LOOKUP(name)                                                                         \
  ssl.name = reinterpret_cast<decltype(&::name)>(::dlsym(handle, #name));                          \
  if (!ssl.name) {                                                                                 \
    ssl.error = "libssl.so.3 has no " #name;                                                       \
    return ssl;                                                                                    \
  }
    RLOCK_OPENSSL_FUNCTIONS(RLOCK_LOOKUP)
#undef RLOCK_LOOKUP
    return ssl;  // the handle stays open for the life of the process
  }
};

const OpenSsl& openssl() {
  const OpenSsl& ssl = OpenSsl::get();
  if (ssl.error.empty()) return ssl;
  if (shortage(ssl.load_errno, Call::opening))
    throw system_call_error("cannot load OpenSSL's libssl.so.3 for rediss://", "dlopen",
                            ssl.load_errno);  // once: the next connection would need it again
  throw Error(k_exit_config, "rediss:// needs OpenSSL's libssl.so.3: " + ssl.error);
}

// The oldest error in OpenSSL's queue for this thread, as text; the queue is emptied.
std::string ssl_error_text(const OpenSsl& ssl) {
  unsigned long code = ssl.ERR_get_error();
  ssl.ERR_clear_error();
  if (code == 0) return "unknown error";
  char buf[256];
  ssl.ERR_error_string_n(code, buf, sizeof buf);
  return buf;
}

// Why loading material failed (MESSAGE says what): rlock's shortage when a system call in
// OpenSSL's queue failed for want of descriptors or memory (exit 125), else the material
// itself, with OpenSSL's oldest error (78). The queue is emptied.
Error material_error(const OpenSsl& ssl, const std::string& message) {
  unsigned long first = ssl.ERR_get_error();
  for (unsigned long code = first; code != 0; code = ssl.ERR_get_error())
    if (ERR_GET_LIB(code) == ERR_LIB_SYS && shortage(ERR_GET_REASON(code), Call::opening)) {
      ssl.ERR_clear_error();
      return system_call_error(message, "OpenSSL", ERR_GET_REASON(code));
    }
  if (first == 0) return Error(k_exit_config, message + ": unknown error");
  char buf[256];
  ssl.ERR_error_string_n(first, buf, sizeof buf);
  return Error(k_exit_config, message + ": " + buf);
}

using CtxPtr = std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)>;
using SslPtr = std::unique_ptr<SSL, void (*)(SSL*)>;

CtxPtr make_context(const OpenSsl& ssl, const TlsOptions& o) {
  CtxPtr ctx(ssl.SSL_CTX_new(ssl.TLS_client_method()), ssl.SSL_CTX_free);
  if (!ctx) throw Error(k_exit_internal, "SSL_CTX_new: " + ssl_error_text(ssl));
  ssl.SSL_CTX_ctrl(ctx.get(), SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_2_VERSION, nullptr);
  ssl.SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  if (!o.cacert.empty() || !o.cacertdir.empty()) {
    // OpenSSL looks into a CA directory only during the handshake, and takes a missing one for
    // an empty one: the mistake would surface as an unverifiable server, far from its cause.
    struct stat st {};
    if (!o.cacertdir.empty() && (::stat(o.cacertdir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)))
      throw Error(k_exit_config, "--cacertdir " + o.cacertdir + " is not a directory");
    if (ssl.SSL_CTX_load_verify_locations(ctx.get(), o.cacert.empty() ? nullptr : o.cacert.c_str(),
                                          o.cacertdir.empty() ? nullptr : o.cacertdir.c_str()) != 1)
      throw material_error(ssl, "cannot load CA certificates from " +
                                    (o.cacert.empty() ? o.cacertdir : o.cacert));
  } else if (ssl.SSL_CTX_set_default_verify_paths(ctx.get()) != 1) {
    throw material_error(ssl, "cannot load the system's CA certificates");
  }
  if (o.cert.empty() != o.key.empty())
    throw Error(k_exit_config, "--cert and --key go together (a client certificate needs its key)");
  if (!o.cert.empty()) {
    if (ssl.SSL_CTX_use_certificate_chain_file(ctx.get(), o.cert.c_str()) != 1)
      throw material_error(ssl, "cannot load the certificate " + o.cert);
    if (ssl.SSL_CTX_use_PrivateKey_file(ctx.get(), o.key.c_str(), SSL_FILETYPE_PEM) != 1)
      throw material_error(ssl, "cannot load the key " + o.key);
    if (ssl.SSL_CTX_check_private_key(ctx.get()) != 1)
      throw Error(k_exit_config, "the key " + o.key + " does not match " + o.cert);
  }
  return ctx;
}

bool is_ip_literal(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return ::inet_pton(AF_INET, host.c_str(), buf) == 1 ||
         ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

class TlsStream final : public Stream {
public:
  TlsStream(const OpenSsl& ssl, Fd fd, CtxPtr ctx, SslPtr conn, std::string endpoint)
      : ssl_(ssl), fd_(std::move(fd)), ctx_(std::move(ctx)), conn_(std::move(conn)),
        endpoint_(std::move(endpoint)) {
    ssl_.SSL_set_msg_callback(conn_.get(), &TlsStream::on_message);
    ssl_.SSL_ctrl(conn_.get(), SSL_CTRL_SET_MSG_CALLBACK_ARG, 0, this);
  }

  int socket() const override { return fd_.get(); }

  // Makes one OpenSSL call: its result when it did something; 0 when the stream ended; a Step
  // with nothing moved when it waits for the socket.
  template <class F> Result<Step> call(F f) {
    ssl_.ERR_clear_error();
    int r = f();
    if (r > 0) return Step{static_cast<size_t>(r), 0};
    int err = ssl_.SSL_get_error(conn_.get(), r);
    if (err == SSL_ERROR_WANT_READ) return Step{0, POLLIN};
    if (err == SSL_ERROR_WANT_WRITE) return Step{0, POLLOUT};
    if (err == SSL_ERROR_ZERO_RETURN) return Step{};
    int sys_errno = errno;
    if (err == SSL_ERROR_SSL)
      if (auto refused = refusal()) return *refused;
    if (err == SSL_ERROR_SYSCALL && ssl_.ERR_get_error() == 0) {
      if (sys_errno == 0) return Step{};
      return Failure{Failure::Kind::io, endpoint_ + ": TLS: " + std::strerror(sys_errno)};
    }
    return Failure{Failure::Kind::io, endpoint_ + ": TLS: " + ssl_error_text(ssl_)};
  }

  // The server's refusal, when OpenSSL's error is an alert it sent ("certificate required",
  // "unknown ca", "bad certificate", "certificate expired" ...): it answered, and will answer
  // the same again, so no waiter retries it. Under TLS 1.3 a refused client certificate comes
  // after our side of the handshake is done, at the first read: nothing sent had run.
  std::optional<Failure> refusal() {
    unsigned long code = ssl_.ERR_peek_error();
    if (ERR_GET_LIB(code) != ERR_LIB_SSL || ERR_GET_REASON(code) < SSL_AD_REASON_OFFSET)
      return std::nullopt;
    ssl_.ERR_clear_error();
    // "tlsv13 alert certificate required": the alert's description.
    const char* text = ssl_.ERR_reason_error_string(code);
    std::string alert = text ? text : "alert " + std::to_string(ERR_GET_REASON(code));
    if (size_t at = alert.find("alert "); at != std::string::npos) alert.erase(0, at + 6);
    std::string hint;
    switch (ERR_GET_REASON(code) - SSL_AD_REASON_OFFSET) {
    case SSL_AD_CERTIFICATE_REQUIRED:
      hint = " (it wants a client certificate: --cert and --key)";
      break;
    case SSL_AD_BAD_CERTIFICATE:
    case SSL_AD_UNSUPPORTED_CERTIFICATE:
    case SSL_AD_CERTIFICATE_REVOKED:
    case SSL_AD_CERTIFICATE_EXPIRED:
    case SSL_AD_CERTIFICATE_UNKNOWN:
    case SSL_AD_UNKNOWN_CA:
    case SSL_AD_ACCESS_DENIED:
      hint = " (it does not accept the client certificate of --cert)";
      break;
    default: break;
    }
    return Failure{Failure::Kind::connect,
                   endpoint_ + " refused the TLS connection: " + alert + hint, "",
                   Failure::Why::tls_refused};
  }

  Result<short> handshake() override {
    if (verdict_by_) return await_verdict();
    auto r = call([&] { return ssl_.SSL_connect(conn_.get()); });
    if (r && r->bytes > 0) {
      if (!asked_for_certificate_ || ssl_.SSL_version(conn_.get()) != TLS1_3_VERSION)
        return static_cast<short>(0);
      // TLS 1.3 with our certificate asked for: the server judges it now, after our side of
      // the handshake. A command sent before its word would be left unread by a server that
      // refuses, whose close then resets the connection, and the reset destroys its alert
      // (Redis 7.4 and Valkey 8, always): wait for that word, a ticket or an alert, a while.
      Millis took = std::chrono::duration_cast<Millis>(Clock::now() - started_);
      verdict_by_ = Clock::now() + std::clamp(2 * took, k_verdict_floor, k_verdict_cap);
      return await_verdict();
    }
    if (r && r->wait) return r->wait;
    // A server that does not answer may come back (the caller's deadline says when it gave
    // up); one that answered and refused (its certificate, our CA, the protocol) will refuse
    // again: no waiter retries that.
    long verify = ssl_.SSL_get_verify_result(conn_.get());
    if (verify != X509_V_OK)
      return Failure{Failure::Kind::connect,
                     "TLS certificate verification failed for " + endpoint_ + ": " +
                         ssl_.X509_verify_cert_error_string(verify),
                     "", Failure::Why::tls_refused};
    // Closed mid-handshake: a server going down (or a TLS proxy without its backend) looks
    // the same as one that speaks no TLS, and may come back.
    if (r)
      return Failure{Failure::Kind::connect, "TLS handshake with " + endpoint_ +
                                                 " failed: the server closed the connection"};
    if (r.failure().why == Failure::Why::tls_refused) return r.failure();
    return Failure{Failure::Kind::connect,
                   "TLS handshake with " + endpoint_ + " failed: " + r.failure().message, "",
                   Failure::Why::tls_refused};
  }

  std::optional<TimePoint> wake_at() const override { return verdict_by_; }

  std::optional<int64_t> certificate_expiry() const override {
    X509* cert = ssl_.SSL_get1_peer_certificate(conn_.get());
    if (!cert) return std::nullopt;
    std::tm tm{};
    bool read = ssl_.ASN1_TIME_to_tm(ssl_.X509_get0_notAfter(cert), &tm) == 1;
    ssl_.X509_free(cert);
    if (!read) return std::nullopt;
    return static_cast<int64_t>(::timegm(&tm));
  }

  Result<Step> write_some(const char* bytes, size_t len) override {
    auto n = call([&] { return ssl_.SSL_write(conn_.get(), bytes, static_cast<int>(len)); });
    if (!n ? n.failure().why != Failure::Why::tls_refused : n->bytes == 0 && n->wait == 0)
      if (auto refused = silent_refusal()) return *refused;
    if (n && n->bytes == 0 && n->wait == 0)
      return Failure{Failure::Kind::io, endpoint_ + ": connection closed"};
    return n;
  }

  Result<Step> read_some(char* buf, size_t len) override {
    auto n = call([&] { return ssl_.SSL_read(conn_.get(), buf, static_cast<int>(len)); });
    if (n && n->bytes > 0) heard_ = true;
    if (!n ? n.failure().why != Failure::Why::tls_refused : n->bytes == 0 && n->wait == 0)
      if (auto refused = silent_refusal()) return *refused;
    return n;
  }

private:
  // Under TLS 1.3 the server judges our certificate after our side of the handshake is over,
  // and we send the first command at once: a server that refuses it and closes then resets
  // the connection (our command unread), and the reset may overtake its alert. A connection
  // reset or closed before the server said anything after a handshake that asked for a
  // client certificate is that refusal: a server that accepts sends its session tickets
  // first, and answers. (A server that sends no tickets and dies at that instant is taken for
  // a refusal too, and ends a wait.)
  std::optional<Failure> silent_refusal() const {
    if (!asked_for_certificate_ || heard_ || ssl_.SSL_version(conn_.get()) != TLS1_3_VERSION)
      return std::nullopt;
    return Failure{Failure::Kind::connect,
                   endpoint_ + " refused the TLS connection: closed right after asking for a "
                               "client certificate (it does not accept that of --cert, or wants "
                               "one: --cert and --key)",
                   "", Failure::Why::tls_refused};
  }

  // After a TLS 1.3 handshake that asked for our certificate (handshake()): done once the
  // server has said something (an accepting server sends its session tickets at once), or at
  // verdict_by_ (one that sends none: the command goes, and silent_refusal() still tells a
  // refusal); the server's alert is its refusal, named.
  Result<short> await_verdict() {
    char byte;
    auto r = call([&] { return ssl_.SSL_peek(conn_.get(), &byte, 1); });
    if (!r && r.failure().why == Failure::Why::tls_refused) return r.failure();
    if (!r || (r->bytes == 0 && r->wait == 0)) {
      if (auto refused = silent_refusal()) return *refused;
      if (!r) return r.failure();
      return Failure{Failure::Kind::connect, "TLS handshake with " + endpoint_ +
                                                 " failed: the server closed the connection"};
    }
    if (heard_ || r->bytes > 0 || Clock::now() >= *verdict_by_) return static_cast<short>(0);
    return r->wait;
  }

  // OpenSSL's report of each protocol message: what the server asked for and said.
  static void on_message(int write_p, int, int content_type, const void* buf, size_t len, SSL*,
                         void* arg) {
    if (write_p || content_type != SSL3_RT_HANDSHAKE || len == 0) return;
    auto* self = static_cast<TlsStream*>(arg);
    switch (*static_cast<const unsigned char*>(buf)) {
    case SSL3_MT_CERTIFICATE_REQUEST: self->asked_for_certificate_ = true; break;
    case SSL3_MT_NEWSESSION_TICKET: self->heard_ = true; break;
    default: break;
    }
  }

  const OpenSsl& ssl_;
  TimePoint started_ = Clock::now();
  std::optional<TimePoint> verdict_by_;  // awaiting the server's word on our certificate
  bool asked_for_certificate_ = false;   // the server's handshake had a CertificateRequest
  bool heard_ = false;  // the server said something after the handshake: a ticket, a reply
  Fd fd_;  // declared before conn_: the SSL object is freed first, then the socket closed
  CtxPtr ctx_;
  SslPtr conn_;
  std::string endpoint_;
};

}  // namespace

std::unique_ptr<Stream> make_tls_stream(Fd fd, const std::string& host, const std::string& endpoint,
                                        const TlsOptions& options) {
  const OpenSsl& ssl = openssl();
  CtxPtr ctx = make_context(ssl, options);
  SslPtr conn(ssl.SSL_new(ctx.get()), ssl.SSL_free);
  if (!conn) throw Error(k_exit_internal, "SSL_new: " + ssl_error_text(ssl));
  ssl.SSL_set_fd(conn.get(), fd.get());
  const std::string& name = options.sni.empty() ? host : options.sni;
  if (is_ip_literal(name)) {
    // An address is checked against the certificate's IP entries; SNI cannot carry one.
    ssl.X509_VERIFY_PARAM_set1_ip_asc(ssl.SSL_get0_param(conn.get()), name.c_str());
  } else {
    ssl.SSL_set1_host(conn.get(), name.c_str());
    ssl.SSL_ctrl(conn.get(), SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                 const_cast<char*>(name.c_str()));
  }
  return std::make_unique<TlsStream>(ssl, std::move(fd), std::move(ctx), std::move(conn), endpoint);
}

std::optional<std::string> tls_library_version() {
  const OpenSsl& ssl = OpenSsl::get();
  if (!ssl.error.empty()) return std::nullopt;
  return std::string(ssl.OpenSSL_version(OPENSSL_VERSION));
}

}  // namespace rlock
