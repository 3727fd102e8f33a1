#include "process/output_capture.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>

#include "util/resources.h"

namespace rlock {

namespace {

// How much is read at once: with the pipe (64 KiB), the most the command can be ahead of its
// destination.
constexpr size_t k_read_bytes = 256 * 1024;

// How a destination is written without ever blocking.
enum class Way {
  plain,   // a file or a device: a write does not wait on a reader
  own,     // a pipe, through a non-blocking description of its own (own_fd)
  socket,  // send(2) with MSG_DONTWAIT
  fifo,    // a pipe that could not be opened again: PIPE_BUF at a time, once poll says so
};

// While drain() waits, how often it looks whether rlock was asked to stop.
constexpr Millis k_finish_look{50};

int64_t ns_of(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// Bytes waiting in pipe FD.
uint64_t waiting_in(int fd) {
  int n = 0;
  return fd >= 0 && ::ioctl(fd, FIONREAD, &n) == 0 && n > 0 ? static_cast<uint64_t>(n) : 0;
}

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
  bool open = false;     // the read end has not met its end
  uint64_t owed = 0;     // once finishing: what the command wrote before it ended, unwritten
  uint64_t dropped = 0;  // could not be written on

  size_t unsent() const { return buf.size() - off; }
  // Reads a chunk, hands it to KEEP and writes it on: the bytes read.
  size_t read(const OutputCapture::Keep& keep);
  // Writes on what it can now: the bytes written.
  size_t forward();
  // The destination is gone: the command meets that too (EPIPE, SIGPIPE).
  void close() {
    buf.clear();
    off = 0;
    read_end.reset();
    open = false;
  }
};

size_t Channel::read(const OutputCapture::Keep& keep) {
  buf.resize(k_read_bytes);
  ssize_t n;
  do n = ::read(read_end.get(), buf.data(), buf.size());
  while (n < 0 && errno == EINTR);
  buf.resize(n > 0 ? static_cast<size_t>(n) : 0);
  off = 0;
  if (n > 0) {
    keep(stream, buf);
    forward();
    return static_cast<size_t>(n);
  }
  if (n == 0 || errno != EAGAIN) {
    read_end.reset();
    open = false;
  }
  return 0;
}

size_t Channel::forward() {
  size_t written = 0;
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
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
      close();
      break;
    }
    if (n <= 0) {
      // A full disk, an I/O error: the command's own write would have failed; the chunk is
      // dropped, counted, and the command goes on.
      dropped += unsent();
      buf.clear();
      off = 0;
      break;
    }
    off += static_cast<size_t>(n);
    written += static_cast<size_t>(n);
    owed -= std::min<uint64_t>(owed, static_cast<uint64_t>(n));
    if (way == Way::fifo) break;  // poll again before the next write
  }
  if (off == buf.size()) {
    buf.clear();
    off = 0;
  }
  return written;
}

struct OutputCapture::State {
  Keep keep;
  Channel channels[2];
  int count = 0;
  int command_fd[3] = {-1, -1, -1};
  bool terminal[3] = {false, false, false};
  Fd wake_read, wake_write;
  std::atomic<int64_t> finish_ns{0};    // when drain() began; 0: not yet
  std::atomic<int64_t> patience_ms{0};  // drain()'s
  std::atomic<int64_t> progress_ns{0};  // when a byte last moved
  std::atomic<bool> abandon{false};     // give up now (rlock was asked to stop)
  uint64_t dropped = 0;                 // once run() has returned
  // mark(): what to call once the pipes are read empty, until the thread or mark() calls it.
  std::mutex mark_mutex;
  std::condition_variable marked;
  std::function<void()> mark_at;

  void run();
  // Calls MARK_AT, if any, once no pipe holds a byte: all the thread read is handed to KEEP.
  void take_mark();
};

void OutputCapture::State::take_mark() {
  std::lock_guard<std::mutex> guard(mark_mutex);
  if (!mark_at) return;
  for (int i = 0; i < count; ++i)
    if (channels[i].open && waiting_in(channels[i].read_end.get()) > 0) return;
  mark_at();
  mark_at = nullptr;
  marked.notify_all();
}

void OutputCapture::State::run() {
  bool finishing = false;
  TimePoint finish_at{};
  Millis patience{0};
  for (;;) {
    TimePoint now = Clock::now();
    if (!finishing && finish_ns.load() != 0) {
      finishing = true;
      finish_at = TimePoint(std::chrono::nanoseconds(finish_ns.load()));
      patience = Millis(patience_ms.load());
      // What the command wrote before its group was done is all written on, however long its
      // reader takes; what comes after (from a process outside the group) only for a while.
      for (int i = 0; i < count; ++i)
        channels[i].owed = waiting_in(channels[i].read_end.get()) + channels[i].unsent();
    }
    if (abandon.load()) break;
    take_mark();
    bool owing = false;
    for (int i = 0; i < count; ++i) owing = owing || channels[i].owed > 0;
    TimePoint last_move = TimePoint(std::chrono::nanoseconds(progress_ns.load()));
    if (finishing && !owing && now >= std::max(last_move, finish_at) + patience) break;
    pollfd fds[3];
    Channel* of[3] = {};
    int n = 0;
    for (int i = 0; i < count; ++i) {
      Channel& c = channels[i];
      if (c.unsent() > 0)
        fds[n] = {c.way == Way::own ? c.own_fd.get() : c.dest, POLLOUT, 0};
      else if (c.open && (!finishing || c.owed > 0 || now < finish_at + patience))
        fds[n] = {c.read_end.get(), POLLIN, 0};
      else
        continue;
      of[n++] = &c;
    }
    if (n == 0) break;  // every pipe met its end (or its time), and all read was written on
    fds[n] = {wake_read.get(), POLLIN, 0};
    int timeout = -1;
    if (finishing && !owing) {
      TimePoint next = std::max(last_move, finish_at) + patience;
      if (now < finish_at + patience) next = std::min(next, finish_at + patience);
      timeout = static_cast<int>(
          std::clamp<int64_t>(std::chrono::ceil<Millis>(next - now).count(), 1, INT_MAX));
    }
    if (::poll(fds, static_cast<nfds_t>(n + 1), timeout) < 0 && errno != EINTR) break;
    if (fds[n].revents) {
      char drain[16];
      while (::read(wake_read.get(), drain, sizeof drain) > 0) {}
    }
    size_t moved = 0;
    for (int i = 0; i < n; ++i) {
      if (!fds[i].revents) continue;
      moved += of[i]->unsent() > 0 ? of[i]->forward() : of[i]->read(keep);
    }
    if (moved > 0) progress_ns.store(ns_of(Clock::now()));
  }
  for (int i = 0; i < count; ++i)
    dropped += channels[i].dropped + channels[i].unsent() +
               (channels[i].open ? waiting_in(channels[i].read_end.get()) : 0);
}

OutputCapture::OutputCapture(Keep keep) : state_(std::make_shared<State>()) {
  State& s = *state_;
  s.keep = std::move(keep);
  struct stat seen[3]{};
  for (int fd = 1; fd <= 2; ++fd) {
    // Closed, or held closed by rlock (main.cpp: /dev/null for reading): the command gets it
    // as it is.
    int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || (flags & O_ACCMODE) == O_RDONLY) continue;
    if (::isatty(fd)) {
      s.terminal[fd] = true;
      continue;
    }
    if (::fstat(fd, &seen[fd]) != 0) continue;
    int type = 0;
    socklen_t len = sizeof type;
    if (S_ISSOCK(seen[fd].st_mode) &&
        (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM))
      continue;  // a datagram socket: a chunk of ours would not be one of the command's writes
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
  if (thread_.running()) (void)drain(Millis(0), Millis(0), [] { return true; });
}

int OutputCapture::command_fd(int stream) const { return state_->command_fd[stream]; }

bool OutputCapture::terminal(int stream) const { return state_->terminal[stream]; }

void OutputCapture::start() {
  thread_.start([state = state_] { state->run(); });
}

void OutputCapture::spawned() {
  for (int i = 0; i < state_->count; ++i) state_->channels[i].command_end.reset();
}

void OutputCapture::mark(const std::function<void()>& at, Millis patience) {
  State& s = *state_;
  std::unique_lock<std::mutex> lock(s.mark_mutex);
  if (thread_.running()) {
    s.mark_at = at;
    char c = 1;
    (void)!::write(s.wake_write.get(), &c, 1);
    if (s.marked.wait_for(lock, patience, [&] { return !s.mark_at; })) return;
  }
  // Not read empty in time, or no thread to read: here, wherever that falls.
  s.mark_at = nullptr;
  at();
}

uint64_t OutputCapture::drain(Millis patience, Millis grace,
                              const std::function<bool()>& asked_to_stop) {
  State& s = *state_;
  if (!thread_.running()) return 0;
  spawned();
  s.patience_ms.store(patience.count());
  s.finish_ns.store(ns_of(Clock::now()));
  auto wake = [&] {
    char c = 1;
    (void)!::write(s.wake_write.get(), &c, 1);
  };
  wake();
  std::optional<TimePoint> give_up_at;  // GRACE after rlock was asked to stop
  // Waited for as long as bytes move or are owed, unless rlock is asked to stop, or the thread
  // is held up in a write that does not return (a file system that hangs).
  while (!thread_.wait_until(Clock::now() + k_finish_look)) {
    TimePoint now = Clock::now();
    if (!give_up_at && asked_to_stop && asked_to_stop()) give_up_at = now + grace;
    if (give_up_at && now >= *give_up_at && !s.abandon.load()) {
      s.abandon.store(true);
      wake();
    }
    // The thread looks at ABANDON before each poll: one that has not stopped by the next look
    // is in a write that does not return. It ends by itself, with the state it shares.
    if (give_up_at && now >= *give_up_at + k_finish_look && !thread_.join_by(now))
      return k_unknown_dropped;
  }
  thread_.join_by(Clock::now());
  return s.dropped;
}

}  // namespace rlock
