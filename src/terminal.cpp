#include "terminal.h"

#include <unistd.h>

namespace rlock {

std::unique_ptr<Terminal> Terminal::if_foreground() {
  int fd = STDIN_FILENO;
  if (!::isatty(fd) || ::tcgetpgrp(fd) != ::getpgrp()) return nullptr;
  std::unique_ptr<Terminal> t(new Terminal(fd));
  t->have_saved_ = ::tcgetattr(fd, &t->saved_) == 0;
  return t;
}

Terminal::~Terminal() { take_back(); }

// SIGTTOU is blocked (SignalEvents), so these calls work from a background process group.
void Terminal::hand_to(pid_t pgid) { ::tcsetpgrp(fd_, pgid); }

void Terminal::take_back() {
  ::tcsetpgrp(fd_, ::getpgrp());
  if (have_saved_) ::tcsetattr(fd_, TCSADRAIN, &saved_);
}

}  // namespace rlock
