#include "process/output_capture.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <system_error>

#include "util/resources.h"

namespace rlock {

namespace {

// How much is read at once: the most the command can be ahead of its destination, besides
// what the pipe holds.
constexpr size_t k_read_bytes = 256 * 1024;
// The capture pipes' size: fewer wake-ups for a command that prints fast (best effort: the
// system's pipe-max-size, 1 MiB by default, bounds it).
constexpr int k_pipe_bytes = 1 << 20;
// How long finish() waits past its deadline for the thread to notice it.
constexpr Millis k_finish_margin{100};

// How a destination is written without ever blocking.
enum class Way {
  plain,   // a file or a device: a write does not wait on a reader
  own,     // a pipe, through a non-blocking description of its own (own_fd)
  socket,  // send(2) with MSG_DONTWAIT
  fifo,    // a pipe that could not be opened again: PIPE_BUF at a time, once poll says so
};

}  // namespace

// One pipe of the capture: what the command writes to STREAM, on its way to DEST.
struct Channel {
  int stream = 1;
  int dest = 1;
  Way way = Way::plain;
  Fd own_fd;
  Fd read_end, command_end;
  std::string buf;  // read, not yet written on (from off)
  size_t off = 0;
  bool open = false;  // the read end has not met its end

  size_t unsent() const { return buf.size() - off; }
  // Reads a chunk, hands it to KEEP; false at the pipe's end.
  void read(const OutputCapture::Keep& keep);
  // Writes on what it can now.
  void forward();
  // The destination is gone: the command meets that too (EPIPE, SIGPIPE).
  void close() {
    buf.clear();
    off = 0;
    read_end.reset();
    open = false;
  }
};

void Channel::read(const OutputCapture::Keep& keep) {
  buf.resize(k_read_bytes);
  ssize_t n;
  do n = ::read(read_end.get(), buf.data(), buf.size());
  while (n < 0 && errno == EINTR);
  buf.resize(n > 0 ? static_cast<size_t>(n) : 0);
  off = 0;
  if (n > 0) {
    keep(stream, buf);
    forward();
  } else if (n == 0 || errno != EAGAIN) {
    read_end.reset();
    open = false;
  }
}

void Channel::forward() {
  while (off < buf.size()) {
    const char* p = buf.data() + off;
    size_t len = buf.size() - off;
    ssize_t n;
    switch (way) {
    case Way::socket: n = ::send(dest, p, len, MSG_DONTWAIT | MSG_NOSIGNAL); break;
    case Way::own: n = ::write(own_fd.get(), p, len); break;
    case Way::fifo: n = ::write(dest, p, std::min<size_t>(len, PIPE_BUF)); break;
    default: n = ::write(dest, p, len); break;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      close();
      return;
    }
    off += static_cast<size_t>(n);
    if (way == Way::fifo) break;  // poll again before the next write
  }
  if (off == buf.size()) {
    buf.clear();
    off = 0;
  }
}

struct OutputCapture::State {
  Keep keep;
  Channel channels[2];
  int count = 0;
  int command_fd[3] = {-1, -1, -1};
  bool terminal[3] = {false, false, false};
  Fd wake_read, wake_write;
  std::atomic<int64_t> deadline_ns{0};  // 0: none yet (finish() sets it)
  std::mutex mutex;
  std::condition_variable ended;
  bool done = false;
  uint64_t dropped = 0;

  void run();
};

void OutputCapture::State::run() {
  for (;;) {
    pollfd fds[3];
    Channel* of[3] = {};
    int n = 0;
    for (int i = 0; i < count; ++i) {
      Channel& c = channels[i];
      if (c.unsent() > 0)
        fds[n] = {c.way == Way::own ? c.own_fd.get() : c.dest, POLLOUT, 0};
      else if (c.open)
        fds[n] = {c.read_end.get(), POLLIN, 0};
      else
        continue;
      of[n++] = &c;
    }
    if (n == 0) break;  // every pipe met its end, and all of it was written on
    fds[n] = {wake_read.get(), POLLIN, 0};
    int64_t deadline = deadline_ns.load();
    int timeout = -1;
    if (deadline != 0) {
      auto left =
          std::chrono::ceil<Millis>(TimePoint(std::chrono::nanoseconds(deadline)) - Clock::now());
      if (left.count() <= 0) break;
      timeout = static_cast<int>(std::min<int64_t>(left.count(), INT_MAX));
    }
    if (::poll(fds, static_cast<nfds_t>(n + 1), timeout) < 0 && errno != EINTR) break;
    if (fds[n].revents) {
      char drain[16];
      while (::read(wake_read.get(), drain, sizeof drain) > 0) {}
    }
    for (int i = 0; i < n; ++i) {
      if (!fds[i].revents) continue;
      if (of[i]->unsent() > 0)
        of[i]->forward();
      else
        of[i]->read(keep);
    }
  }
  std::lock_guard<std::mutex> guard(mutex);
  for (int i = 0; i < count; ++i) dropped += channels[i].unsent();
}

OutputCapture::OutputCapture(Keep keep) : state_(std::make_shared<State>()) {
  State& s = *state_;
  s.keep = std::move(keep);
  struct stat seen[3]{};
  for (int fd = 1; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) < 0) continue;  // closed: the command gets it closed too
    if (::isatty(fd)) {
      s.terminal[fd] = true;
      continue;
    }
    if (::fstat(fd, &seen[fd]) != 0) continue;
    // Where stderr leads where stdout does, they share the pipe: their order stays exact.
    if (fd == 2 && s.command_fd[1] >= 0 && seen[1].st_dev == seen[2].st_dev &&
        seen[1].st_ino == seen[2].st_ino) {
      s.command_fd[2] = s.command_fd[1];
      continue;
    }
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0)
      throw system_call_error("cannot keep the command's output", "pipe2");
    Channel& c = s.channels[s.count++];
    c.read_end.reset(p[0]);
    c.command_end.reset(p[1]);
    c.stream = fd;
    c.dest = fd;
    c.open = true;
    (void)::fcntl(p[1], F_SETPIPE_SZ, k_pipe_bytes);
    (void)::fcntl(p[0], F_SETFL, O_NONBLOCK);
    s.command_fd[fd] = p[1];
    if (S_ISSOCK(seen[fd].st_mode)) {
      c.way = Way::socket;
    } else if (S_ISFIFO(seen[fd].st_mode)) {
      // A description of the pipe of its own, to make non-blocking without changing rlock's
      // (which others share).
      std::string path = "/proc/self/fd/" + std::to_string(fd);
      c.own_fd.reset(::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
      c.way = c.own_fd.valid() ? Way::own : Way::fifo;
    }
  }
  int w[2];
  if (::pipe2(w, O_CLOEXEC | O_NONBLOCK) != 0)
    throw system_call_error("cannot keep the command's output", "pipe2");
  s.wake_read.reset(w[0]);
  s.wake_write.reset(w[1]);
}

OutputCapture::~OutputCapture() {
  if (thread_.joinable()) (void)finish(Clock::now());
}

int OutputCapture::command_fd(int stream) const { return state_->command_fd[stream]; }

bool OutputCapture::terminal(int stream) const { return state_->terminal[stream]; }

void OutputCapture::start() {
  for (int i = 0; i < state_->count; ++i) state_->channels[i].command_end.reset();
  thread_ = std::thread([state = state_] {
    state->run();
    std::lock_guard<std::mutex> guard(state->mutex);
    state->done = true;
    state->ended.notify_all();
  });
}

uint64_t OutputCapture::finish(TimePoint deadline) {
  State& s = *state_;
  if (!thread_.joinable()) return 0;
  s.deadline_ns.store(
      std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count());
  char c = 1;
  (void)!::write(s.wake_write.get(), &c, 1);
  std::unique_lock<std::mutex> lock(s.mutex);
  if (s.ended.wait_until(lock, deadline + k_finish_margin, [&] { return s.done; })) {
    lock.unlock();
    thread_.join();
  } else {
    lock.unlock();
    thread_.detach();  // held up in a write to a file that does not answer: it ends by itself
  }
  std::lock_guard<std::mutex> guard(s.mutex);
  return s.dropped;
}

}  // namespace rlock
