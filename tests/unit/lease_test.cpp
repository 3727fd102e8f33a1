#include <doctest/doctest.h>

#include "lease.h"

using namespace rlock;
using namespace std::chrono_literals;

TEST_CASE("drift is ttl/100 + 2ms") {
  CHECK(lease_drift(30s) == 302ms);
  CHECK(lease_drift(1s) == 12ms);
  CHECK(lease_drift(100ms) == 3ms);
}

TEST_CASE("the lease counts from when the renewal was sent, minus drift") {
  TimePoint sent{};
  CHECK(lease_deadline(sent, 30s) == sent + 30s - 302ms);
  CHECK(lease_deadline(sent, 30s) < sent + 30s);
}

TEST_CASE("renewal cadence leaves room for retries inside one lease") {
  for (Millis ttl : {Millis(100), Millis(1000), Millis(3000), Millis(30000), Millis(600000)}) {
    CAPTURE(ttl.count());
    CHECK(renew_interval(ttl) == ttl / 3);
    // After the first failed renewal at ttl/3, retries fit before the deadline.
    Millis left = ttl - lease_drift(ttl) - renew_interval(ttl);
    CHECK(left / renew_retry_interval(ttl) >= 2);
    CHECK(renew_attempt_timeout(ttl) < left);
  }
}

TEST_CASE("kill-after: default and its bound") {
  CHECK(default_kill_after(30s) == 5s);
  CHECK(default_kill_after(6s) == 2s);
  CHECK(kill_after_allowed(default_kill_after(1s), 1s));
  CHECK(kill_after_allowed(14s, 30s));
  CHECK(!kill_after_allowed(15s, 30s));
  CHECK(!kill_after_allowed(20s, 30s));
}

TEST_CASE("with the defaults, SIGKILL lands before the key expires on the server") {
  for (Millis ttl : {Millis(100), Millis(1000), Millis(30000)}) {
    TimePoint sent{};
    TimePoint deadline = lease_deadline(sent, ttl);
    TimePoint term_at = deadline - default_kill_after(ttl);
    CHECK(term_at > sent + renew_interval(ttl));  // at least one renewal was tried first
    CHECK(deadline < sent + ttl);                 // KILL goes out before the server's expiry
  }
}
