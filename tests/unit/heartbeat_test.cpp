#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

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

TEST_CASE("a heartbeat file that cannot be made is an error naming the call and the path") {
  Heartbeat beat("/nonexistent-dir/beat", 1000ms);
  auto problem = beat.start(Clock::now());
  REQUIRE(problem.has_value());
  CHECK(problem->find("open /nonexistent-dir/beat") != std::string::npos);
}

TEST_CASE("absolute_path") {
  CHECK(absolute_path("/a/b") == "/a/b");
  char* cwd = ::getcwd(nullptr, 0);
  CHECK(absolute_path("x") == std::string(cwd) + "/x");
  std::free(cwd);
}
