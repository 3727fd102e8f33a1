#include "process/terminal.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include "util/log.h"
#include "util/stderr_writer.h"
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
// Modes are set at once (TCSANOW), not after the output drains (TCSADRAIN): a terminal stopped
// with Ctrl-S never drains, and rlock would wait there, its command ended, its lock not given
// back, until someone pressed Ctrl-Q.
void Terminal::hand_to(pid_t pgid) {
  if (!have_saved_) have_saved_ = ::tcgetattr(fd_, &saved_) == 0;  // started in the background
  if (have_child_ && pgid == given_to_) ::tcsetattr(fd_, TCSANOW, &child_);
  given_to_ = pgid;
  ::tcsetpgrp(fd_, pgid);
}

void Terminal::take_back() {
  pid_t foreground = ::tcgetpgrp(fd_);
  if (foreground != ::getpgrp() && foreground != given_to_) return;
  if (foreground == given_to_) have_child_ = ::tcgetattr(fd_, &child_) == 0;
  ::tcsetpgrp(fd_, ::getpgrp());
  if (have_saved_) ::tcsetattr(fd_, TCSANOW, &saved_);
}

StatusLine::StatusLine() : enabled_(::isatty(STDERR_FILENO) && verbosity() != Verbosity::quiet) {}

void StatusLine::draw(const std::string& text) {
  if (!enabled_) return;
  winsize ws{};
  size_t width = ::ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 80;
  std::string line = "\r\033[K" + terminal_safe(text, width - 4, Backslashes::kept);
  write_stderr(std::move(line));
  shown_ = true;
}

void StatusLine::clear() {
  if (!shown_) return;
  write_stderr("\r\033[K");
  shown_ = false;
}

}  // namespace rlock
