#include "process/heartbeat.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "util/fd.h"
#include "util/trusted_file.h"

namespace rlock {

// F is the job's, and may be in a directory others can write (/var/tmp): a link planted there
// is not followed, and a file another user owns or anyone may write is refused, as whoever
// can touch it could keep a hung job "alive" (trusted_file.h).
Fd Heartbeat::open(std::string& problem) const {
  TrustedDir dir = TrustedDir::open(path_);
  if (!dir.problem().empty()) {
    problem = dir.problem();
    return Fd();
  }
  return dir.open_file(base_name(path_), O_WRONLY | O_CREAT, problem);
}

std::optional<std::string> Heartbeat::check() const {
  std::string problem;
  if (!open(problem).valid()) return problem;
  return std::nullopt;
}

std::optional<std::string> Heartbeat::start(TimePoint now) {
  std::string problem;
  Fd fd = open(problem);
  if (!fd.valid()) return problem;
  if (::futimens(fd.get(), nullptr) != 0) return errno_message("futimens " + path_);
  seen_ = look();
  last_beat_ = now;
  last_look_ = now;
  return std::nullopt;
}

std::optional<Heartbeat::Stamp> Heartbeat::look() const {
  struct statx st {};
  // A link, or a file another user made in F's place (the job removed F), is no beat.
  if (::statx(AT_FDCWD, path_.c_str(), AT_SYMLINK_NOFOLLOW,
              STATX_TYPE | STATX_UID | STATX_INO | STATX_MTIME | STATX_BTIME, &st) != 0 ||
      !S_ISREG(st.stx_mode) || (st.stx_uid != 0 && st.stx_uid != ::geteuid()))
    return std::nullopt;
  Stamp stamp{makedev(st.stx_dev_major, st.stx_dev_minor), st.stx_ino, {}, {}};
  if (st.stx_mask & STATX_BTIME) stamp.born = {st.stx_btime.tv_sec, st.stx_btime.tv_nsec};
  stamp.mtime = {st.stx_mtime.tv_sec, st.stx_mtime.tv_nsec};
  return stamp;
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
