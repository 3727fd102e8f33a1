#include "process/heartbeat.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "util/fd.h"

namespace rlock {

std::optional<std::string> Heartbeat::check() const {
  Fd fd(::open(path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0644));
  if (!fd.valid()) return errno_message("open " + path_);
  return std::nullopt;
}

std::optional<std::string> Heartbeat::start(TimePoint now) {
  Fd fd(::open(path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0644));
  if (!fd.valid()) return errno_message("open " + path_);
  if (::futimens(fd.get(), nullptr) != 0) return errno_message("futimens " + path_);
  seen_ = look();
  last_beat_ = now;
  last_look_ = now;
  return std::nullopt;
}

std::optional<Heartbeat::Stamp> Heartbeat::look() const {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) return std::nullopt;
  return Stamp{st.st_dev, st.st_ino, st.st_mtim, st.st_ctim};
}

bool Heartbeat::stale(TimePoint now) {
  std::optional<Stamp> stamp = look();
  if (stamp && stamp != seen_) {
    // It changed since the last look: when its mtime says, if that is since the last look;
    // an mtime from before it (a clock step, touch -d, cp -p) or from the future is not the
    // time of this change, which is then now.
    auto mtime = std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::seconds(stamp->mtime.tv_sec) +
            std::chrono::nanoseconds(stamp->mtime.tv_nsec)));
    auto age =
        std::chrono::duration_cast<Clock::duration>(std::chrono::system_clock::now() - mtime);
    bool since_last_look = age >= Clock::duration::zero() && age <= now - last_look_;
    last_beat_ = std::max(last_beat_, since_last_look ? now - age : now);
  }
  // Removed is no beat; made again, it is.
  seen_ = stamp;
  last_look_ = now;
  return now >= deadline();
}

std::string absolute_path(const std::string& path) {
  if (path.empty() || path.front() == '/') return path;
  char* cwd = ::getcwd(nullptr, 0);
  if (!cwd) return path;
  std::string out = std::string(cwd) + "/" + path;
  ::free(cwd);
  return out;
}

}  // namespace rlock
