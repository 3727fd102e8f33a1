#include <doctest/doctest.h>

#include "lock/lock_watch.h"

using namespace rlock;
using namespace std::chrono_literals;
using Kind = WatchEvent::Kind;
using Evidence = WatchEvent::Evidence;

namespace {

// A lock held by the rlock value with TOKEN and FENCE, PTTL left.
LockState held(const std::string& token, int64_t fence, Millis pttl) {
  LockState s;
  s.key = "k";
  s.kind = LockState::Kind::held;
  s.type = "string";
  s.raw = "rlock/1 " + token + " host=h pid=1 user=u since=2026-12-01T03:00:00.000Z cmd=c fence=" +
          std::to_string(fence);
  s.value = decode_lock_value(s.raw);
  s.pttl = pttl;
  return s;
}

LockState free_lock() {
  LockState s;
  s.key = "k";
  s.type = "none";
  return s;
}

std::vector<Kind> kinds(const std::vector<WatchEvent>& events) {
  std::vector<Kind> out;
  for (const auto& e : events) out.push_back(e.kind);
  return out;
}

const std::string k_token(32, 'a');

}  // namespace

TEST_CASE("renewals are late with less than half the ttl left") {
  CHECK_FALSE(renewal_late(20s, 30s));  // rlock's cadence: renewed with 2/3 left
  CHECK_FALSE(renewal_late(19s, 30s));  // one failed attempt, retried after ttl/30
  CHECK(renewal_late(14s, 30s));
}

TEST_CASE("a holder gone before its ttl ran out was released; after, it expired") {
  TimePoint t0{};
  for (auto [gone_after, expired] : {std::pair{1s, false}, std::pair{3s, true}}) {
    LockWatch w;
    CHECK(kinds(w.look(free_lock(), t0, {})) == std::vector{Kind::state});
    CHECK(kinds(w.look(held(k_token, 7, 2000ms), t0 + 100ms, {})) == std::vector{Kind::taken});
    auto events = w.look(free_lock(), t0 + 100ms + gone_after, {});
    REQUIRE(events.size() == 1);
    CHECK(events[0].kind == (expired ? Kind::expired : Kind::released));
    CHECK(events[0].evidence == Evidence::ttl);
    CHECK(events[0].held == gone_after);
    CHECK(events[0].value->fence == 7);
  }
}

TEST_CASE("a keyspace event says released or expired, whatever the timing") {
  TimePoint t0{};
  LockWatch w;
  (void)w.look(held(k_token, 7, 30s), t0, {});
  auto events = w.look(free_lock(), t0 + 1s, {"del", "expired"});  // the last one counts
  REQUIRE(events.size() == 1);
  CHECK(events[0].kind == Kind::expired);
  CHECK(events[0].evidence == Evidence::notification);
  CHECK(events[0].held.count() == -1);  // taken before the watch began
}

TEST_CASE("a late renewal and an overdue one") {
  TimePoint t0{};
  LockWatch w;
  (void)w.look(free_lock(), t0, {});
  (void)w.look(held(k_token, 7, 30s), t0, {});
  // Renewed on time: nothing to say.
  CHECK(w.look(held(k_token, 7, 30s), t0 + 10s, {}).empty());
  // Half the ttl gone without a renewal: overdue, once, and a look is due then.
  REQUIRE(w.due());
  CHECK(*w.due() == t0 + 10s + 15s + 1ms);
  CHECK(kinds(w.look(held(k_token, 7, 14s), t0 + 26s, {})) == std::vector{Kind::overdue});
  CHECK(w.look(held(k_token, 7, 13s), t0 + 27s, {}).empty());
  // Then renewed with 10s left: late.
  auto events = w.look(held(k_token, 7, 30s), t0 + 30s, {});
  REQUIRE(kinds(events) == std::vector{Kind::renewed_late});
  CHECK(events[0].left == 10s);
  CHECK(events[0].lease == 30s);
}

TEST_CASE("a run no look saw is told from its history entry") {
  TimePoint t0{};
  LockWatch w;
  LockState before = free_lock();
  (void)w.look(before, t0, {});
  LockState after = free_lock();
  RunRecord run;
  run.id = "1-0";
  run.fence = 9;
  run.held_ms = 3;
  run.end = run_end_name(RunEnd::exited);
  after.last_run = run;
  auto events = w.look(after, t0 + 250ms, {});
  CHECK(kinds(events) == std::vector{Kind::taken, Kind::released});
  CHECK(events[1].evidence == Evidence::history);
  CHECK(events[1].held == 3ms);
  // A run that was seen is not told again when its entry comes.
  (void)w.look(held(k_token, 11, 30s), t0 + 500ms, {});
  (void)w.look(free_lock(), t0 + 750ms, {"del"});
  LockState logged = free_lock();
  run.id = "2-0";
  run.fence = 11;
  logged.last_run = run;
  CHECK(w.look(logged, t0 + 1s, {}).empty());
}

TEST_CASE("a lock kept for --min-hold after its run is not overdue") {
  TimePoint t0{};
  LockWatch w;
  (void)w.look(free_lock(), t0, {});
  (void)w.look(held(k_token, 7, 30s), t0, {});
  LockState kept = held(k_token, 7, 50s);  // renewed for the rest of --min-hold, then its entry
  RunRecord run;
  run.id = "1-0";
  run.fence = 7;
  run.end = run_end_name(RunEnd::exited);
  kept.last_run = run;
  CHECK(w.look(kept, t0 + 1s, {}).empty());
  kept.pttl = 10s;
  CHECK(w.look(kept, t0 + 41s, {}).empty());
  CHECK_FALSE(w.due());
  LockState gone = free_lock();
  gone.last_run = run;
  auto events = w.look(gone, t0 + 52s, {});
  REQUIRE(kinds(events) == std::vector{Kind::expired});
  CHECK(events[0].evidence == Evidence::ttl);
}

TEST_CASE("every run recorded between two looks is told, in order, once") {
  TimePoint t0{};
  LockWatch w;
  (void)w.look(held(k_token, 5, 30s), t0, {});
  auto run = [](const std::string& id, int64_t fence, RunEnd end) {
    RunRecord r;
    r.id = id;
    r.fence = fence;
    r.held_ms = fence;
    r.end = run_end_name(end);
    return r;
  };
  // The holder seen, released; two runs no look saw, a skip between them; then a new holder.
  std::vector<RunRecord> runs{run("1-0", 5, RunEnd::exited), run("2-0", 6, RunEnd::exited),
                              run("3-0", 0, RunEnd::busy), run("4-0", 7, RunEnd::lost)};
  LockState now = held(std::string(32, 'b'), 8, 30s);
  now.last_run = runs.back();
  auto events = w.look(now, t0 + 1s, {}, runs);
  REQUIRE(kinds(events) == std::vector{Kind::released, Kind::taken, Kind::released, Kind::taken,
                                       Kind::expired, Kind::taken});
  // The seen holder's release is told by its own run's entry, though another run's is newest.
  CHECK(events[0].evidence == Evidence::history);
  REQUIRE(events[0].run);
  CHECK(events[0].run->fence == 5);
  std::vector<int64_t> fences;
  for (const auto& e : events) fences.push_back(*e.value->fence);
  CHECK(fences == std::vector<int64_t>{5, 6, 6, 7, 7, 8});
  CHECK(events[2].held == 6ms);
  CHECK(events[4].evidence == Evidence::history);  // lost: it expired
  // The same entries again (a look that read nothing new keeps last_run): nothing.
  CHECK(w.look(now, t0 + 1250ms, {}).empty());
}

TEST_CASE("a waiter that took the lock on a resume is told after the resume") {
  TimePoint t0{};
  LockWatch w;
  LockState paused = free_lock();
  paused.pause = "rlock-pause by=alice@ops-1";
  paused.pause_pttl = 60000ms;
  paused.waiters = 1;
  CHECK(kinds(w.look(paused, t0, {})) == std::vector{Kind::state});
  // One look sees the pause gone, the waiter holding the lock and the queue empty.
  LockState taken = held(k_token, 8, 30000ms);
  CHECK(kinds(w.look(taken, t0 + 100ms, {})) ==
        std::vector{Kind::resumed, Kind::taken, Kind::dequeued});
  // A take and a pause seen in one look: the take came first (nothing is taken once paused).
  CHECK(kinds(w.look(free_lock(), t0 + 200ms, {})) == std::vector{Kind::released});
  LockState next = held(std::string(32, 'b'), 9, 30000ms);
  next.pause = "rlock-pause by=bob@ops-2";
  next.pause_pttl = 60000ms;
  CHECK(kinds(w.look(next, t0 + 300ms, {})) == std::vector{Kind::taken, Kind::paused});
}
