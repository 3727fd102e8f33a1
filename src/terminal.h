// The controlling terminal, when rlock runs as its foreground job: the child's process group gets
// the terminal (so it can read it and Ctrl-C reaches it, once), and rlock takes it back after.
// And the status line rlock redraws on a terminal's stderr while it waits.
#pragma once

#include <sys/types.h>
#include <termios.h>

#include <memory>
#include <string>

namespace rlock {

class Terminal {
public:
  // The terminal on stdin when our process group is its foreground group; nullptr otherwise
  // (cron, pipes, a background job).
  static std::unique_ptr<Terminal> if_foreground();
  ~Terminal();

  int fd() const { return fd_; }
  void hand_to(pid_t pgid);
  // Makes our group the foreground again and restores the modes saved at the start (a child
  // killed in raw mode must not leave the terminal unusable).
  void take_back();

private:
  explicit Terminal(int fd) : fd_(fd) {}
  int fd_;
  termios saved_{};
  bool have_saved_ = false;
};

// One line on stderr, redrawn in place, while rlock waits on a terminal: who holds the lock,
// for how long, how long we have waited. Nothing when stderr is not a terminal or with -q.
class StatusLine {
public:
  StatusLine();
  ~StatusLine() { clear(); }
  bool enabled() const { return enabled_; }
  void draw(const std::string& text);
  void clear();

private:
  bool enabled_;
  bool shown_ = false;
};

}  // namespace rlock
