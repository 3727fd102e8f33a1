// --heartbeat-file F --stale-after D: the command proves it is alive by touching F; a job that
// has not changed F for D is hung (a deadlock, a read that never returns), and `run` stops it
// as it stops a command that lost the lock, instead of renewing the lock for ever.
//
// Any change of F's modification time or of the file itself (a new file renamed over it)
// counts; a change of its metadata alone (chmod, a link) does not. When that change happened
// is taken from the file's mtime (wall clock) when it falls between the previous look and this
// one, else it is this look's time (steady clock): a wall clock step, `touch -d` with an old
// date, a copy that kept its mtime (cp -p, rsync -t) or an NFS server's clock can neither make
// a live job look hung nor hide a hung one for longer than one look.
#pragma once

#include <sys/types.h>
#include <time.h>

#include <optional>
#include <string>

#include "util/clock.h"
#include "util/duration.h"
#include "util/error.h"
#include "util/fd.h"

namespace rlock {

class Heartbeat {
public:
  // PATH absolute (absolute_path()), so the command finds it from any directory.
  Heartbeat(std::string path, Millis stale_after) : path_(std::move(path)), stale_(stale_after) {}

  // Whether F can be the heartbeat: made if need be, but not touched (another run of the job,
  // still going, may be beating on it). An error message naming the call and the path when
  // it cannot, or why F is not trusted (a link, another user's file, one anyone may write, a
  // directory another user could swap it in: trusted_file.h): then nothing may start.
  std::optional<std::string> check() const;
  // Touches F (made if need be): the job's first beat is its start. An error message when it
  // cannot: then the command must not start.
  std::optional<std::string> start(TimePoint now);

  // Looks at F. True when it has not changed for stale_after; else deadline() moves on.
  bool stale(TimePoint now);
  // When, without a change of F, the job counts as hung; the supervisor's next look.
  TimePoint deadline() const { return last_beat_ + stale_; }

  const std::string& path() const { return path_; }
  Millis stale_after() const { return stale_; }

private:
  // F opened for writing (made if need be), or why not in PROBLEM.
  Fd open(std::string& problem) const;

  // What identifies one state of F: a touch changes its mtime; a new file renamed over it is
  // another inode, told by its number and, where the file system reports it, its birth time.
  // The number alone is not enough: the file system may give the new file the inode the last
  // rename freed (ext4 does: a loop of `cp -p T F.new && mv F.new F` alternates between two
  // inode numbers, every copy with T's mtime), and two looks an even number of copies apart
  // would see the same F. Not ctime: a chmod, a link or a relabelling changes it, and is no
  // beat.
  struct Stamp {
    dev_t dev = 0;
    ino_t ino = 0;
    timespec born{};  // zero where the file system does not say
    timespec mtime{};
    bool operator==(const Stamp& o) const {
      return dev == o.dev && ino == o.ino && same(born, o.born) && same(mtime, o.mtime);
    }
    static bool same(const timespec& a, const timespec& b) {
      return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
    }
  };
  std::optional<Stamp> look() const;

  std::string path_;
  Millis stale_;
  std::optional<Stamp> seen_;  // F as last seen; nullopt: missing (the command removed it)
  TimePoint last_beat_{};      // when F last changed, on the steady clock
  TimePoint last_look_{};
};

// PATH made absolute against the current directory (not resolved: symlinks stay).
std::string absolute_path(const std::string& path);

}  // namespace rlock
