#include "log.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

namespace rlock {

namespace {

std::atomic<Verbosity> g_verbosity{Verbosity::normal};

void emit(const char* level, const std::string& message) {
  std::string line = "rlock: ";
  if (*level) line += std::string(level) + ": ";
  line += message;
  line += '\n';
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // stderr closed: nothing better to do with a log line
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace

void set_verbosity(Verbosity v) { g_verbosity = v; }
Verbosity verbosity() { return g_verbosity; }

void log_debug(const std::string& message) {
  if (g_verbosity == Verbosity::verbose) emit("", message);
}

void log_info(const std::string& message) {
  if (g_verbosity != Verbosity::quiet) emit("", message);
}

void log_warning(const std::string& message) {
  if (g_verbosity != Verbosity::quiet) emit("warning", message);
}

void log_error(const std::string& message) { emit("error", message); }

}  // namespace rlock

namespace rlock {

StatusLine::StatusLine()
    : enabled_(::isatty(STDERR_FILENO) && g_verbosity.load() != Verbosity::quiet) {}

void StatusLine::draw(const std::string& text) {
  if (!enabled_) return;
  winsize ws{};
  size_t width = ::ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 80;
  std::string line = "\r\033[K" + text.substr(0, width - 1);
  [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
  shown_ = true;
}

void StatusLine::clear() {
  if (!shown_) return;
  [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, "\r\033[K", 4);
  shown_ = false;
}

}  // namespace rlock
