#include "util/stderr_writer.h"

#include "util/background_thread.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>

#include "util/clock.h"
#include "util/log.h"

namespace rlock {

namespace {

// What may wait for stderr, a pipe's worth: a burst of lines (a -v run's renewals)
// fits; a stderr that takes nothing for long loses what comes after this.
constexpr size_t k_queue_limit = 4096;

struct Queue {
  std::mutex mutex;
  std::condition_variable wake;     // the writer: there is something to write
  std::condition_variable written;  // flush_stderr(): the writer got on
  std::deque<std::string> texts;
  size_t bytes = 0;      // queued, and the text being written
  bool writing = false;  // the writer has a text out of `texts`, in write(2)
  bool started = false;  // the writer thread runs
  bool quit = false;     // the writer is to end once the texts are written (stop_stderr_writer)
  std::thread writer;
  bool inherited = false;  // forked: the texts are the parent's (after_fork_in_child)
  uint64_t progress = 0;   // texts written
  TimePoint moved;         // when the writer last began or finished a write, or got work
  uint64_t dropped = 0;    // lines dropped since the last notice
  TimePoint first_drop;
};

Queue* g_queue = nullptr;

// A whole text to stderr, however long that takes; a stderr that fails (closed, EPIPE) takes
// nothing more of it.
void write_out(const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(STDERR_FILENO, text.data() + done, text.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && errno == EAGAIN) {
      // Someone made the shared file description non-blocking (the command may have): wait.
      pollfd p{STDERR_FILENO, POLLOUT, 0};
      ::poll(&p, 1, -1);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return;
    }
  }
}

void writer_main(Queue* q) {
  std::unique_lock lock(q->mutex);
  for (;;) {
    q->wake.wait(lock, [q] { return !q->texts.empty() || q->quit; });
    if (q->texts.empty()) return;  // asked to quit, all written
    std::string text = std::move(q->texts.front());
    q->texts.pop_front();
    q->writing = true;
    q->moved = Clock::now();
    lock.unlock();
    write_out(text);
    lock.lock();
    q->writing = false;
    q->bytes -= text.size();
    ++q->progress;
    q->moved = Clock::now();
    if (q->dropped > 0) {
      // stderr takes lines again: say what it missed, after what was queued before the drops.
      auto stalled = std::chrono::duration_cast<Millis>(Clock::now() - q->first_drop);
      std::string notice = dropped_lines_notice(q->dropped, stalled);
      q->dropped = 0;
      q->bytes += notice.size();
      q->texts.push_back(std::move(notice));
    }
    q->written.notify_all();
  }
}

// With every signal blocked, so that none is ever delivered to this thread: rlock's signals are
// events read in its main loop (process/signals.h), and a thread that left one unblocked would
// take it with its default action (the death of rlock, lock held).
void start_writer(Queue& q) {
  AllSignalsBlocked blocked;
  try {
    q.writer = std::thread(writer_main, &q);
    q.started = true;
  } catch (const std::system_error&) {
    // No thread to be had (ulimit -u, memory): the text waits; flush_stderr() writes it.
  }
}

// A forked child (a --password-command's, the keeper's) has no writer thread, and what is
// queued is its parent's to write: it starts empty. The mutex is held across the fork, so that
// no other thread is half way through a change of the queue when the child copies it. Nothing
// here allocates or frees: the texts are dropped on the child's first use (take_over()).
void before_fork() { g_queue->mutex.lock(); }
void after_fork_in_parent() { g_queue->mutex.unlock(); }
void after_fork_in_child() {
  Queue* q = g_queue;
  q->mutex.unlock();                       // locked by this thread, the child's only one
  new (&q->wake) std::condition_variable;  // the parent's writer may have waited on it
  new (&q->written) std::condition_variable;
  new (&q->writer) std::thread;  // the parent's, which the child does not have
  q->writing = q->started = q->quit = false;
  q->inherited = true;
}

void take_over(Queue& q) {
  if (!q.inherited) return;
  q.inherited = false;
  q.texts.clear();
  q.bytes = 0;
  q.dropped = 0;
}

Queue& queue() {
  static Queue* q = [] {
    // Never freed: the writer may still be in write(2) as rlock exits (its std::thread is
    // never destroyed, so never joined then).
    g_queue = new Queue;
    pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
    return g_queue;
  }();
  return *q;
}

size_t line_count(const std::string& text) {
  size_t n = 0;
  for (char c : text) n += c == '\n';
  return n > 0 ? n : 1;
}

// Without a writer thread (none could be started): the texts, written here as long as poll()
// says stderr takes them, until PATIENCE is over; without the queue's lock, which the renewal
// thread's lines and a fork need meanwhile.
void write_directly(std::unique_lock<std::mutex>& lock, Queue& q, Millis patience) {
  std::deque<std::string> texts = std::move(q.texts);
  q.texts.clear();
  q.bytes = 0;
  lock.unlock();
  TimePoint give_up = Clock::now() + patience;
  for (const std::string& text : texts) {
    pollfd p{STDERR_FILENO, POLLOUT, 0};
    if (::poll(&p, 1, millis_until(give_up)) <= 0) break;
    write_out(text);
  }
  lock.lock();
}

}  // namespace

void write_stderr(std::string text) {
  Queue& q = queue();
  std::lock_guard lock(q.mutex);
  take_over(q);
  if (q.bytes > 0 && q.bytes + text.size() > k_queue_limit) {
    if (q.dropped == 0) q.first_drop = Clock::now();
    q.dropped += line_count(text);
    return;
  }
  if (q.texts.empty() && !q.writing) q.moved = Clock::now();  // the writer's wait starts now
  q.bytes += text.size();
  q.texts.push_back(std::move(text));
  if (!q.started) start_writer(q);
  q.wake.notify_one();
}

bool flush_stderr(Millis patience) {
  Queue& q = queue();
  std::unique_lock lock(q.mutex);
  take_over(q);
  if (!q.started && !q.texts.empty()) start_writer(q);
  if (!q.started) write_directly(lock, q, patience);
  // Counted from the writer's last move: a stderr that has taken nothing for a while already
  // gets no more time here.
  while (!q.texts.empty() || q.writing) {
    if (!q.started) return false;
    TimePoint give_up = q.moved + patience;
    if (Clock::now() >= give_up) return false;
    q.written.wait_until(lock, give_up);
  }
  return true;
}

void stop_stderr_writer(Millis patience) {
  if (!flush_stderr(patience)) return;  // a writer stuck in write(2) would never be joined
  Queue& q = queue();
  std::unique_lock lock(q.mutex);
  if (!q.started) return;
  q.quit = true;
  q.wake.notify_one();
  lock.unlock();
  q.writer.join();
  lock.lock();
  q.started = q.quit = false;
}

}  // namespace rlock
