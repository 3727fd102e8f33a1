// Intervals and deadlines are measured on the monotonic clock, never on the wall clock: a wall
// clock step (NTP, an operator's `date -s`) must not stretch or shrink a lease.
#pragma once

#include <chrono>

namespace rlock {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;

// Milliseconds from now until T, 0 when T has passed; for poll() timeouts.
inline int millis_until(TimePoint t) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(t - Clock::now()).count();
  if (left <= 0) return 0;
  return left > 1'000'000'000 ? 1'000'000'000 : static_cast<int>(left);
}

}  // namespace rlock
