#include <doctest/doctest.h>

#include "lock/lease.h"

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

TEST_CASE("the outage a holder rides through, and the ttl a failover window needs") {
  // ttl 30s: renewed every 10s, drift 302ms, kill-after 5s, a retry every second.
  CHECK(outage_ridden(30s, 5s) == Millis(30000 - 10000 - 302 - 5000 - 1000));
  // A ttl so short that the kill-after and the renewal take it all rides through nothing.
  CHECK(outage_ridden(Millis(30), Millis(14)) == Millis(0));
  CHECK(outage_ridden(Millis(300), Millis(100)) == Millis(300 - 100 - 5 - 100 - 10));
  // Each ttl found rides the window, and the second below it does not.
  for (Millis window : {Millis(500), Millis(3000), Millis(7500), Millis(38500)}) {
    Millis ttl = smallest_ttl_riding(window, std::nullopt);
    CHECK(outage_ridden(ttl, default_kill_after(ttl)) >= window);
    Millis shorter = ttl - 1s;
    CHECK((shorter < 1s || outage_ridden(shorter, default_kill_after(shorter)) < window));
  }
  // Sentinel's defaults, a lost primary (docs/DESIGN.md "Failover windows"): 36 s needs 64 s.
  CHECK(smallest_ttl_riding(36s, std::nullopt) == 64s);
  // A window no ttl of a day rides stops the count there.
  CHECK(smallest_ttl_riding(Millis(48LL * 3600 * 1000), std::nullopt) ==
        Millis(24LL * 3600 * 1000));
  // A kill-after given stays below ttl/2.
  CHECK(kill_after_allowed(20s, smallest_ttl_riding(1s, 20s)));
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

TEST_CASE("the loss policy: the command goes on until kill-after before the end") {
  using Act = LossVerdict::Act;
  using Why = LossVerdict::Why;
  using State = Renewals::State;
  const TimePoint deadline = TimePoint{} + 30s;
  const Millis kill_after = 5s;
  auto judge = [&](State state, TimePoint now, bool ignore = false) {
    return judge_lease(state, deadline, now, kill_after, ignore);
  };
  SUBCASE("held, before the threshold: go on") {
    CHECK(judge(State::held, deadline - 5001ms).act == Act::go_on);
    CHECK(loss_threshold(deadline, kill_after, false) == deadline - 5s);
  }
  SUBCASE("held, unrenewed at the threshold: stopped so that SIGKILL lands at the end") {
    LossVerdict v = judge(State::held, deadline - 5s);
    CHECK(v.act == Act::stop);
    CHECK(v.why == Why::unreachable);
    CHECK(v.kill_at == deadline);
  }
  SUBCASE("not ours: kill-after to stop, but never past the lease") {
    LossVerdict v = judge(State::not_mine, deadline - 20s);
    CHECK(v.act == Act::stop);
    CHECK(v.why == Why::not_ours);
    CHECK(v.kill_at == deadline - 15s);
    CHECK(judge(State::not_mine, deadline - 2s).kill_at == deadline);
  }
  SUBCASE("past the end, or expired: SIGKILL at once, whatever the state") {
    for (State s : {State::held, State::not_mine, State::expired}) {
      LossVerdict v = judge(s, deadline);
      CHECK(v.act == Act::kill_now);
      CHECK(v.why == Why::ran_out);
    }
    CHECK(judge(State::expired, deadline - 10s).act == Act::kill_now);
  }
  SUBCASE("--on-lost ignore: held until the end itself, then ignored") {
    CHECK(judge(State::held, deadline - 1ms, true).act == Act::go_on);
    CHECK(loss_threshold(deadline, kill_after, true) == deadline);
    CHECK(judge(State::held, deadline, true).act == Act::ignore);
    CHECK(judge(State::not_mine, deadline - 20s, true).act == Act::ignore);
  }
}
