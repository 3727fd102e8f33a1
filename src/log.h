// Events on stderr, one line each, written with a single write(2) so lines from the renewal
// thread and the main thread never interleave.
#pragma once

#include <string>

namespace rlock {

enum class Verbosity { quiet, normal, verbose };

void set_verbosity(Verbosity v);
Verbosity verbosity();

// -v only: routine events (acquired at once, renewed, released).
void log_debug(const std::string& message);
// Notable events: acquired after waiting, busy, renewal trouble. Silenced by -q.
void log_info(const std::string& message);
void log_warning(const std::string& message);
// Always shown: lost lock, failures that decide the exit status.
void log_error(const std::string& message);

}  // namespace rlock

namespace rlock {

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
