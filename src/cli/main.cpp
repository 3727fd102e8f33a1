#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <exception>
#include <new>

#include "cli/cli.h"
#include "util/error.h"
#include "util/log.h"
#include "util/stderr_writer.h"

namespace {

// A closed stdin, stdout or stderr would be taken by the next descriptor rlock opens, say its
// Redis socket, and `rlock status >&-` would then write its table into the Redis connection.
// Hold each closed one with /dev/null opened the other way round, so that it stays unusable:
// writing to a closed stdout still fails (EBADF), for rlock and for the command alike.
void hold_closed_standard_fds() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    int held = ::open("/dev/null", fd == 0 ? O_WRONLY : O_RDONLY);
    if (held >= 0 && held != fd) ::close(held);  // cannot happen: the lowest free fd is FD
  }
}

int run(int argc, char** argv) {
  try {
    return rlock::run_command_line(argc, argv);
  } catch (const rlock::Error& e) {
    rlock::log(rlock::Level::error, {"message", e.key(), e.what()});
    return e.exit_status();
  } catch (const std::bad_alloc&) {
    rlock::log_error("out of memory");
  } catch (const std::exception& e) {
    rlock::log_error(e.what());
  }
  return rlock::k_exit_internal;
}

}  // namespace

int main(int argc, char** argv) {
  hold_closed_standard_fds();
  int status = run(argc, argv);
  // rlock's last lines, unless its stderr takes nothing (stderr_writer.h): it exits with its
  // command all the same. The writer thread ends too: ThreadSanitizer sleeps a second at the
  // exit of a process that has threads left.
  rlock::stop_stderr_writer(rlock::k_exit_stderr_patience);
  return status;
}
