// A thread that does one piece of work and may be left behind. Its owner waits for it a bounded
// time, then joins it, or, when the work is held up (a server or a file system that does not
// answer), detaches it to end by itself. So whatever the work uses lives in state it shares
// (a std::shared_ptr its function holds), never in its owner, which may be gone by then.
// Used for the output capture, the output sender and rlock stop's listener (docs/ARCHITECTURE.md
// "Threads and connections").
#pragma once

#include <signal.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "util/clock.h"

namespace rlock {

// Every signal blocked in this thread while it lives, so that a thread made meanwhile inherits
// that mask: rlock's signals (its signalfd, job control's sigtimedwait) are never taken by one
// of its threads, whenever it was made (docs/ARCHITECTURE.md "Threads and connections").
class AllSignalsBlocked {
public:
  AllSignalsBlocked();
  ~AllSignalsBlocked();
  AllSignalsBlocked(const AllSignalsBlocked&) = delete;
  AllSignalsBlocked& operator=(const AllSignalsBlocked&) = delete;

private:
  sigset_t old_;
};

class BackgroundThread {
public:
  BackgroundThread() = default;
  // Not joined yet: detached if the work has not returned by now (join_by(now)).
  ~BackgroundThread();
  BackgroundThread(const BackgroundThread&) = delete;
  BackgroundThread& operator=(const BackgroundThread&) = delete;

  // Runs WORK on a thread of its own, every signal blocked. Throws std::system_error when it cannot
  // start (ulimit -u, out of memory): nothing runs then.
  void start(std::function<void()> work);
  // Started, and neither joined nor detached yet.
  bool running() const { return thread_.joinable(); }
  // Waits until the work has returned or UNTIL has come: whether it has returned.
  bool wait_until(TimePoint until);
  // The work has returned by UNTIL: joined, true. Else detached, false: it ends by itself.
  bool join_by(TimePoint until);

private:
  struct Done {
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;
  };
  std::shared_ptr<Done> done_;
  std::thread thread_;
};

}  // namespace rlock
