// BackgroundThread: joined when its work returns in time, detached when it is held up, and the
// work ends by itself afterwards with the state it shares.
#include <atomic>
#include <chrono>
#include <doctest/doctest.h>
#include <memory>
#include <thread>

#include "util/background_thread.h"

using namespace rlock;
using namespace std::chrono_literals;

TEST_CASE("work that returns in time is joined") {
  BackgroundThread t;
  auto ran = std::make_shared<std::atomic<bool>>(false);
  t.start([ran] { *ran = true; });
  CHECK(t.running());
  CHECK(t.join_by(Clock::now() + 10s));
  CHECK(*ran);
  CHECK(!t.running());
}

TEST_CASE("work held up is detached, and ends by itself") {
  auto release = std::make_shared<std::atomic<bool>>(false);
  auto ended = std::make_shared<std::atomic<bool>>(false);
  {
    BackgroundThread t;
    t.start([release, ended] {
      while (!*release) std::this_thread::sleep_for(1ms);
      *ended = true;
    });
    CHECK(!t.wait_until(Clock::now() + 20ms));
    CHECK(!t.join_by(Clock::now() + 20ms));
    CHECK(!t.running());
  }  // its owner is gone; the work goes on
  *release = true;
  for (int i = 0; i < 10000 && !*ended; ++i) std::this_thread::sleep_for(1ms);
  CHECK(*ended);
}
