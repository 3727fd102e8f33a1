#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <doctest/doctest.h>
#include <string>
#include <vector>

#include "process/heartbeat.h"

using namespace rlock;
using namespace std::chrono_literals;

namespace {

// A heartbeat file in a fresh directory, removed at the end.
struct TempDir {
  TempDir() {
    char name[] = "/tmp/rlock-heartbeat-XXXXXX";
    REQUIRE(::mkdtemp(name) != nullptr);
    path = name;
  }
  ~TempDir() {
    std::remove((path + "/beat").c_str());
    std::remove((path + "/beat.new").c_str());
    std::remove((path + "/beat.tick").c_str());
    ::rmdir(path.c_str());
  }
  std::string file() const { return path + "/beat"; }
  std::string path;
};

// Sets PATH's mtime to SECONDS from now (made if need be): file times tick coarsely (a few
// ms), so two touches in a row may leave the same mtime; these never do.
void touch(const std::string& path, int seconds = 0) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT, 0644);
  REQUIRE(fd >= 0);
  timespec times[2] = {{0, UTIME_OMIT}, {::time(nullptr) + seconds, 0}};
  REQUIRE(::futimens(fd, times) == 0);
  ::close(fd);
}

}  // namespace

TEST_CASE("a heartbeat is stale stale_after after the last change of its file, not before") {
  TempDir dir;
  Heartbeat beat(dir.file(), 2000ms);
  TimePoint t0 = Clock::now();
  REQUIRE_FALSE(beat.start(t0).has_value());
  struct stat st {};
  CHECK(::stat(dir.file().c_str(), &st) == 0);  // start() made the file

  CHECK(beat.deadline() == t0 + 2000ms);

  SUBCASE("untouched, stale at the deadline") {
    CHECK_FALSE(beat.stale(t0 + 1999ms));
    CHECK(beat.stale(t0 + 2000ms));
  }
  SUBCASE("a touch moves the deadline to a whole stale_after from when it was seen") {
    touch(dir.file(), 100);
    CHECK_FALSE(beat.stale(t0 + 1000ms));
    touch(dir.file(), 200);
    // An mtime ahead of the clock (another host's, on NFS) counts as of the look.
    CHECK_FALSE(beat.stale(t0 + 5000ms));
    CHECK(beat.deadline() == t0 + 7000ms);
    CHECK_FALSE(beat.stale(t0 + 6999ms));
    CHECK(beat.stale(t0 + 7000ms));
  }
  SUBCASE("a file renamed over it is a beat (write a temporary, rename)") {
    touch(dir.file() + ".new");
    REQUIRE(::rename((dir.file() + ".new").c_str(), dir.file().c_str()) == 0);
    CHECK_FALSE(beat.stale(t0 + 3000ms));
  }
  SUBCASE("a removed file is no beat, and made again it is") {
    REQUIRE(::unlink(dir.file().c_str()) == 0);
    CHECK(beat.stale(t0 + 3000ms));
    touch(dir.file(), 100);
    CHECK_FALSE(beat.stale(t0 + 4000ms));
    CHECK(beat.deadline() == t0 + 6000ms);
  }
  SUBCASE("an mtime set to the past counts as of the look that saw it") {
    CHECK_FALSE(beat.stale(t0 + 1000ms));
    timespec old[2] = {{0, UTIME_OMIT}, {1000, 0}};  // 1970
    REQUIRE(::utimensat(AT_FDCWD, dir.file().c_str(), old, 0) == 0);
    CHECK_FALSE(beat.stale(t0 + 2500ms));
    CHECK(beat.deadline() == t0 + 4500ms);
  }
  SUBCASE("... also at the first look, at the deadline (cp -p, rsync -t, a clock step)") {
    timespec old[2] = {{0, UTIME_OMIT}, {::time(nullptr) - 3600, 0}};
    touch(dir.file() + ".new");
    REQUIRE(::utimensat(AT_FDCWD, (dir.file() + ".new").c_str(), old, 0) == 0);
    REQUIRE(::rename((dir.file() + ".new").c_str(), dir.file().c_str()) == 0);
    CHECK_FALSE(beat.stale(t0 + 2000ms));
    CHECK(beat.deadline() == t0 + 4000ms);
  }
}

// Makes a copy of a file with an old mtime at PATH.new and renames it over PATH, as
// `cp -p T PATH.new && mv PATH.new PATH` does; returns the inode PATH has then.
ino_t copy_old_over(const std::string& path) {
  std::string fresh = path + ".new";
  touch(fresh);
  timespec old[2] = {{0, UTIME_OMIT}, {1000, 0}};  // one mtime for every copy
  REQUIRE(::utimensat(AT_FDCWD, fresh.c_str(), old, 0) == 0);
  REQUIRE(::rename(fresh.c_str(), path.c_str()) == 0);
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_ino;
}

// Waits until the file system's clock (a tick of a few ms) has moved past PATH's times, so that
// a file made next is born later: a condition, with a deadline.
void wait_for_a_new_tick(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  std::string other = path + ".tick";
  bool moved = false;
  for (int tries = 0; tries < 100000 && !moved; ++tries) {
    touch(other);
    struct stat probe {};
    REQUIRE(::stat(other.c_str(), &probe) == 0);
    moved =
        probe.st_ctim.tv_sec != st.st_ctim.tv_sec || probe.st_ctim.tv_nsec != st.st_ctim.tv_nsec;
  }
  std::remove(other.c_str());
  REQUIRE(moved);
}

TEST_CASE("copies with one old mtime renamed over the file are beats, on a reused inode too") {
  // Where the file system gives a new file the inode the last rename freed (ext4), a loop of
  // `cp -p T F.new && mv F.new F` alternates between two inode numbers, every copy with T's
  // mtime: a look an even number of copies after the last sees the same number and mtime.
  TempDir dir;
  Heartbeat beat(dir.file(), 2000ms);
  TimePoint t0 = Clock::now();
  REQUIRE_FALSE(beat.start(t0).has_value());
  ino_t first = copy_old_over(dir.file());
  CHECK_FALSE(beat.stale(t0 + 1000ms));
  CHECK(beat.deadline() == t0 + 3000ms);
  wait_for_a_new_tick(dir.file());
  // Copies until one gets an inode number seen before (the second on ext4); a file system that
  // never reuses one (tmpfs, btrfs) cannot show the case, and says so.
  std::vector<ino_t> seen{first};
  bool reused = false;
  for (int copies = 0; copies < 8 && !reused; ++copies) {
    ino_t now = copy_old_over(dir.file());
    reused = std::find(seen.begin(), seen.end(), now) != seen.end();
    seen.push_back(now);
  }
  if (!reused) MESSAGE("this file system reused no inode in 8 copies: the case cannot arise");
  CHECK_FALSE(beat.stale(t0 + 2500ms));
  CHECK(beat.deadline() == t0 + 4500ms);
}

TEST_CASE("a change of the file's metadata alone is no beat") {
  TempDir dir;
  Heartbeat beat(dir.file(), 2000ms);
  TimePoint t0 = Clock::now();
  REQUIRE_FALSE(beat.start(t0).has_value());
  wait_for_a_new_tick(dir.file());
  REQUIRE(::chmod(dir.file().c_str(), 0600) == 0);  // its ctime moves
  REQUIRE(::link(dir.file().c_str(), (dir.file() + ".new").c_str()) == 0);
  CHECK_FALSE(beat.stale(t0 + 1999ms));
  CHECK(beat.deadline() == t0 + 2000ms);
  CHECK(beat.stale(t0 + 2000ms));
}

TEST_CASE("a heartbeat file that cannot be made is an error naming the call and the path") {
  Heartbeat beat("/nonexistent-dir/beat", 1000ms);
  auto problem = beat.start(Clock::now());
  REQUIRE(problem.has_value());
  CHECK(problem->find("open /nonexistent-dir: No such file") != std::string::npos);
}

TEST_CASE("absolute_path") {
  CHECK(absolute_path("/a/b") == "/a/b");
  char* cwd = ::getcwd(nullptr, 0);
  CHECK(absolute_path("x") == std::string(cwd) + "/x");
  std::free(cwd);
}
