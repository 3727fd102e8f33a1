#include <doctest/doctest.h>

#include "lock/stop_request.h"

using namespace rlock;
using namespace std::chrono_literals;

TEST_CASE("a stop request reads back as written, the reason last with its spaces") {
  StopRequest r{.by = "alice@ops-1",
                .at = "2026-12-01T03:03:45.023Z",
                .reason = "db maintenance, INC-4711 id=x",
                .signal = 2,
                .kill_after = 5000ms,
                .until_ms = 1700000000000,
                .id = "0123456789abcdef0123456789abcdef"};
  auto back = decode_stop_request(encode_stop_request(r));
  REQUIRE(back);
  CHECK(back->by == r.by);
  CHECK(back->at == r.at);
  CHECK(back->reason == r.reason);
  CHECK(back->signal == 2);
  CHECK(back->kill_after == 5000ms);
  CHECK(back->until_ms == r.until_ms);
  CHECK(back->id == r.id);
}

TEST_CASE("a stop request whose id is no token is refused: it names its asker's answer key") {
  StopRequest r;
  r.by = "alice@ops-1";
  for (const char* id : {"}x", "3f2a9c41", "0123456789ABCDEF0123456789abcdef",
                         "0123456789abcdef0123456789abcde}", "0123456789abcdef0123456789abcdef0"}) {
    r.id = id;
    CHECK_FALSE(decode_stop_request(encode_stop_request(r)));
  }
  r.id = "0123456789abcdef0123456789abcdef";
  CHECK(decode_stop_request(encode_stop_request(r)));
}

TEST_CASE("an older rlock's stop request, without an id, is read") {
  auto r = decode_stop_request("by=alice@ops-1 at=- until=17 signal=0 reason=db");
  REQUIRE(r);
  CHECK(r->id.empty());
  CHECK(r->reason == "db");
}
