#include "process/terminal.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include "util/log.h"
#include "util/text.h"

namespace rlock {

std::unique_ptr<Terminal> Terminal::if_controlling() {
  int fd = STDIN_FILENO;
  if (!::isatty(fd) || ::tcgetsid(fd) != ::getsid(0)) return nullptr;
  std::unique_ptr<Terminal> t(new Terminal(fd));
  if (t->ours()) t->have_saved_ = ::tcgetattr(fd, &t->saved_) == 0;
  return t;
}

Terminal::~Terminal() { take_back(); }

bool Terminal::ours() const { return ::tcgetpgrp(fd_) == ::getpgrp(); }

// SIGTTOU is blocked (SignalEvents), so these calls work from a background process group.
void Terminal::hand_to(pid_t pgid) {
  if (!have_saved_) have_saved_ = ::tcgetattr(fd_, &saved_) == 0;  // started in the background
  if (have_child_ && pgid == given_to_) ::tcsetattr(fd_, TCSADRAIN, &child_);
  given_to_ = pgid;
  ::tcsetpgrp(fd_, pgid);
}

void Terminal::take_back() {
  pid_t foreground = ::tcgetpgrp(fd_);
  if (foreground != ::getpgrp() && foreground != given_to_) return;
  if (foreground == given_to_) have_child_ = ::tcgetattr(fd_, &child_) == 0;
  ::tcsetpgrp(fd_, ::getpgrp());
  if (have_saved_) ::tcsetattr(fd_, TCSADRAIN, &saved_);
}

StatusLine::StatusLine() : enabled_(::isatty(STDERR_FILENO) && verbosity() != Verbosity::quiet) {}

void StatusLine::draw(const std::string& text) {
  if (!enabled_) return;
  winsize ws{};
  size_t width = ::ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 80;
  std::string line = "\r\033[K" + terminal_safe(text, width - 4);
  [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
  shown_ = true;
}

void StatusLine::clear() {
  if (!shown_) return;
  [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, "\r\033[K", 4);
  shown_ = false;
}

}  // namespace rlock
