#include "process/bounded_call.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <exception>

#include "util/clock.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/stderr_writer.h"

namespace rlock {

namespace {

constexpr size_t k_max_reply = 4096;

}  // namespace

BoundedCall call_bounded(const std::function<std::string()>& work, Millis budget) {
  using Outcome = BoundedCall::Outcome;
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return {Outcome::not_started, errno_message("pipe2")};
  Fd reply_read(p[0]), reply_write(p[1]);
  // A fork while another thread is in the allocator's (or a sanitizer runtime's) locks gives a
  // child that deadlocks at its first allocation: rlock's stderr writer, just started to say
  // "busy", ends first (the renewal thread has by now).
  stop_stderr_writer(k_exit_stderr_patience);
  pid_t pid = ::fork();
  if (pid < 0) return {Outcome::not_started, errno_message("fork")};
  if (pid == 0) {
    // Holding nothing of rlock's: not its stdout and stderr (a `$(rlock run ...)` or a
    // supervisor would wait for this process to close them), nor its Redis connection.
    int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int fd = 0; fd <= 2; ++fd) ::dup2(null, fd);
    int keep = reply_write.get();
    ::close_range(3, static_cast<unsigned>(keep - 1), 0);
    ::close_range(static_cast<unsigned>(keep + 1), ~0u, 0);
    std::string reply;
    int status = 0;
    try {
      reply = work().substr(0, k_max_reply);
    } catch (const std::exception& e) {
      reply = e.what();
      status = 1;
    }
    (void)write_all(reply_write.get(), reply.data(), reply.size());
    ::_exit(status);
  }
  reply_write.reset();
  TimePoint deadline = Clock::now() + budget;
  std::string reply;
  bool ended = false;  // end of file: WORK returned (or its process died)
  for (;;) {
    pollfd in{reply_read.get(), POLLIN, 0};
    int n = ::poll(&in, 1, millis_until(deadline));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the time is up
    char buf[512];
    ssize_t got = ::read(reply_read.get(), buf, sizeof buf);
    if (got > 0) {
      reply.append(buf, static_cast<size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      ended = got == 0;
      break;
    }
  }
  if (!ended) {
    ::kill(pid, SIGKILL);
    // Not waited for: it dies when its system call returns. rlock exits soon after, and
    // whoever then becomes its parent (a subreaper, or init) reaps it.
    return {Outcome::timed_out, {}};
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  if (WIFSIGNALED(status))
    return {Outcome::returned, "its writer died of signal " + std::to_string(WTERMSIG(status))};
  return {Outcome::returned, reply};
}

}  // namespace rlock
