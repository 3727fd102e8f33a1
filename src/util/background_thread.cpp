#include "util/background_thread.h"

namespace rlock {

AllSignalsBlocked::AllSignalsBlocked() {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old_);
}

AllSignalsBlocked::~AllSignalsBlocked() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

BackgroundThread::~BackgroundThread() {
  if (running()) (void)join_by(Clock::now());
}

void BackgroundThread::start(std::function<void()> work) {
  auto done = std::make_shared<Done>();
  AllSignalsBlocked blocked;
  thread_ = std::thread([done, work = std::move(work)] {
    work();
    std::lock_guard<std::mutex> guard(done->mutex);
    done->done = true;
    done->cv.notify_all();
  });
  done_ = std::move(done);
}

bool BackgroundThread::wait_until(TimePoint until) {
  if (!done_) return true;
  std::unique_lock<std::mutex> lock(done_->mutex);
  return done_->cv.wait_until(lock, until, [this] { return done_->done; });
}

bool BackgroundThread::join_by(TimePoint until) {
  if (!running()) return true;
  if (wait_until(until)) {
    thread_.join();
    return true;
  }
  thread_.detach();
  return false;
}

}  // namespace rlock
