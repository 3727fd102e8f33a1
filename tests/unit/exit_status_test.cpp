#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <doctest/doctest.h>

#include "process/child.h"
#include "util/exit_status.h"

using namespace rlock;

namespace {

// The wait status of a real process that ran BODY.
template <class F> int status_of(F body) {
  pid_t pid = fork();
  if (pid == 0) {
    body();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

}  // namespace

TEST_CASE("the numbers of man/rlock.1 EXIT STATUS") {
  CHECK(k_exit_usage == 64);
  CHECK(k_exit_unavailable == 69);
  CHECK(k_exit_busy == 75);
  CHECK(k_exit_lost == 76);
  CHECK(k_exit_config == 78);
  CHECK(k_exit_max_run == 124);
  CHECK(k_exit_internal == 125);
  CHECK(k_exit_not_executable == 126);
  CHECK(k_exit_not_found == 127);
}

TEST_CASE("a child's wait status becomes a shell-style exit status") {
  CHECK(exit_status_from_wait(status_of([] { _exit(0); })) == 0);
  CHECK(exit_status_from_wait(status_of([] { _exit(3); })) == 3);
  CHECK(exit_status_from_wait(status_of([] { _exit(255); })) == 255);
  CHECK(exit_status_from_wait(status_of([] { raise(SIGKILL); })) == 128 + SIGKILL);
  CHECK(exit_status_from_wait(status_of([] {
          signal(SIGTERM, SIG_DFL);
          raise(SIGTERM);
        })) == 143);
}

TEST_CASE("commands that cannot run are found before the lock is taken") {
  CHECK(!check_command("true"));
  CHECK(!check_command("/bin/sh"));
  auto missing = check_command("rlock-no-such-command-xyz");
  REQUIRE(missing);
  CHECK(missing->exit_status == 127);
  auto dir = check_command("/tmp");
  REQUIRE(dir);
  CHECK(dir->exit_status == 126);
  auto not_exec = check_command("/etc/passwd");
  REQUIRE(not_exec);
  CHECK(not_exec->exit_status == 126);
  CHECK(check_command("")->exit_status == 127);
}
