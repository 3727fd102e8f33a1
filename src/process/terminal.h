// The controlling terminal, when rlock runs from one: the child's process group gets the
// terminal while rlock is the foreground job (so it can read it and Ctrl-C reaches it, once),
// and rlock takes it back to stop with it (Ctrl-Z) and at the end. When rlock is a background
// job (`&`, `bg`) the shell keeps the terminal, as it would for the command alone.
// And the status line rlock redraws on a terminal's stderr while it waits.
#pragma once

#include <sys/types.h>
#include <termios.h>

#include <memory>
#include <string>

namespace rlock {

class Terminal {
public:
  // The terminal on stdin when it is rlock's controlling terminal; nullptr otherwise (cron,
  // pipes, a daemon).
  static std::unique_ptr<Terminal> if_controlling();
  ~Terminal();

  int fd() const { return fd_; }
  // Whether rlock's process group is the terminal's foreground one (not a background job).
  bool ours() const;
  // Makes PGID (the child's group) the foreground group, with the modes it had when last taken
  // from it.
  void hand_to(pid_t pgid);
  // When the child's group or rlock's has the terminal: makes rlock's group the foreground and
  // restores the modes rlock found (a child stopped or killed in raw mode must not leave the
  // terminal unusable), keeping the child's for the next hand_to(). Nothing when the shell has
  // it (rlock is a background job).
  void take_back();

private:
  explicit Terminal(int fd) : fd_(fd) {}
  int fd_;
  pid_t given_to_ = -1;  // the group last handed the terminal
  termios saved_{};      // rlock's modes, as found the first time it had the terminal
  bool have_saved_ = false;
  termios child_{};  // the child's, when taken from it
  bool have_child_ = false;
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
