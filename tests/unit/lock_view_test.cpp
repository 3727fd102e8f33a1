#include <doctest/doctest.h>

#include "print/lock_view.h"
#include "print/print_text.h"

using namespace rlock;
using namespace std::chrono_literals;

namespace {

const WallTime k_now = *parse_rfc3339("2026-12-01T03:00:10.000Z");

LockState state_of(const std::string& type, const std::string& raw, Millis pttl) {
  LockState s;
  s.key = "k";
  s.type = type;
  s.raw = raw;
  s.pttl = pttl;
  if (type == "none") return s;
  s.value = decode_lock_value(raw);
  s.kind = !s.value          ? LockState::Kind::foreign
           : s.value->broken ? LockState::Kind::broken
                             : LockState::Kind::held;
  return s;
}

const std::string k_value = "rlock/1 " + std::string(32, 'a') +
                            " host=elsewhere pid=7 user=u since=2026-12-01T03:00:00.000Z cmd=c "
                            "fence=5";

}  // namespace

TEST_CASE("a held lock's view: its value, ttl and holder, held since its acquisition") {
  LockView v = view_lock(state_of("string", k_value, 20s), k_now);
  CHECK(v.has_value);
  CHECK(v.value == k_value);
  CHECK(v.ttl == 20s);
  REQUIRE(v.holder);
  CHECK(v.holder->who.host == "elsewhere");
  CHECK(v.holder->token == std::string(32, 'a'));
  CHECK(*v.holder->fence == 5);
  CHECK(v.holder->held == 10s);
  CHECK(v.holder->liveness == Liveness::unknown);  // another host
  CHECK(!v.holder->broken);
  CHECK(lock_details(v) == "by elsewhere pid 7 (c)  for 10s  ttl 20s  token aaaaaaaa...");
}

TEST_CASE("a free lock's view has no value and no holder; another program's has a value alone") {
  LockView free = view_lock(state_of("none", "", Millis(-2)), k_now);
  CHECK(!free.has_value);
  CHECK(!free.holder);
  CHECK(free.ttl == Millis(-2));
  CHECK(lock_details(free).empty());
  LockView foreign = view_lock(state_of("string", "tok", Millis(-1)), k_now);
  CHECK(foreign.has_value);
  CHECK(!foreign.holder);
  CHECK(lock_details(foreign) == "by another client  no ttl  value \"tok\"");
}

TEST_CASE("a tombstone's view: who broke it, how long ago; never held for less than 0") {
  std::string raw = "rlock/1 broken " + k_value.substr(8) +
                    " broken_by=alice@ops-1 broken_at=2026-12-01T03:00:07.000Z";
  LockView v = view_lock(state_of("string", raw, 8s), k_now);
  REQUIRE(v.holder);
  REQUIRE(v.holder->broken);
  CHECK(v.holder->broken->by == "alice@ops-1");
  CHECK(v.holder->broken_ago == 3s);
  CHECK(lock_details(v) ==
        "elsewhere pid 7 (c) was broken by alice@ops-1 3s ago; free once it has stopped, in 8s "
        "at the latest");
  LockView early = view_lock(state_of("string", k_value, 1s), k_now - 1h);
  CHECK(early.holder->held == 0ms);
}

TEST_CASE("a semaphore's places, each with its holder, and the last run's age") {
  LockState s = state_of("none", "", Millis(-2));
  s.kind = LockState::Kind::semaphore;
  s.semaphore.push_back({"t1", k_value, decode_lock_value(k_value), 4s, std::nullopt});
  s.semaphore.push_back({"t2", "not rlock's", std::nullopt, 5s, std::nullopt});
  RunRecord run;
  run.holder.since = k_now - 1min;
  run.held_ms = 30000;
  // Its end is its entry's ID, the server's clock: not since + held (the host's).
  run.id = std::to_string((k_now - 30s).time_since_epoch().count()) + "-0";
  s.last_run = run;
  LockView v = view_lock(s, k_now);
  REQUIRE(v.semaphore.size() == 2);
  CHECK(v.semaphore[0].holder->who.pid == 7);
  CHECK(!v.semaphore[1].holder);
  CHECK(v.semaphore[1].value == "not rlock's");
  CHECK(v.last_run_ago == 30s);
  CHECK(lock_details(v) == "by 2 (semaphore): elsewhere pid 7 (c), another client");
}

TEST_CASE("labelled_rows: values in one column, and no label too long for it") {
  CHECK(labelled_rows({{"key", "k"}, {"fence counter", "3"}}, 15) ==
        "key            k\nfence counter  3\n");
  // inspect's padding was 15 - label.size(): a label of 16 characters or more threw
  // std::length_error, and rlock exited 125.
  std::string long_label = "  " + std::string(20, '9') + ".";
  CHECK(labelled_rows({{long_label, "token"}}, 15) == long_label + " token\n");
  CHECK(labelled_rows({{std::string(15, 'x'), "v"}}, 15) == std::string(15, 'x') + " v\n");
}
