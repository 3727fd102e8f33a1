#include <doctest/doctest.h>

#include "redis/redis.h"
#include "redis/retry.h"

using rlock::error_code;

// Reply texts as each server version sends them (from their sources: Redis 6.0/6.2
// scripting.c luaPushError and evalGenericCommand, 7.x script_lua.c, Valkey 8 the same).
TEST_CASE("error codes at the start of a reply (Redis 7.x, Valkey, and outside scripts)") {
  CHECK(error_code("READONLY You can't write against a read only replica.") == "READONLY");
  CHECK(error_code("READONLY You can't write against a read only replica. script: "
                   "3f6c0b2a..., on @user_script:86.") == "READONLY");
  CHECK(error_code("OOM command not allowed when used memory > 'maxmemory'. script: "
                   "3f6c0b2a..., on @user_script:116.") == "OOM");
  CHECK(error_code("NOPERM this user has no permissions to run the 'evalsha' command") ==
        "NOPERM");
  CHECK(error_code("WRONGTYPE Operation against a key holding the wrong kind of value") ==
        "WRONGTYPE");
  CHECK(error_code("NOSCRIPT No matching script. Please use EVAL.") == "NOSCRIPT");
  CHECK(error_code("ERR unknown command 'FOO'") == "ERR");
  CHECK(error_code("MOVED 3999 127.0.0.1:6381") == "MOVED");
}

TEST_CASE("error codes wrapped by Redis 6.0 and 6.2 around a script's error") {
  CHECK(error_code("ERR Error running script (call to f_3f6c0b2a4a8e1f0d2c7b9e5a1d3c4b6a7f8e9d0c):"
                   " @user_script:86: -READONLY You can't write against a read only replica. ") ==
        "READONLY");
  CHECK(error_code("ERR Error running script (call to f_3f6c0b2a4a8e1f0d2c7b9e5a1d3c4b6a7f8e9d0c):"
                   " @user_script: 116: -OOM command not allowed when used memory > "
                   "'maxmemory'. ") == "OOM");
  CHECK(error_code("ERR Error running script (call to f_3f6c): @user_script: 3: -NOPERM this user "
                   "has no permissions to access one of the keys used as arguments") == "NOPERM");
  // A script error of the script's own (no server error inside) stays ERR.
  CHECK(error_code("ERR Error running script (call to f_3f6c): @user_script:5: user_script:5: "
                   "attempt to compare nil with number ") == "ERR");
  // Not fooled by a dash inside a message.
  CHECK(error_code("ERR Error running script (call to f_3f6c): @user_script:5: a -b c") == "ERR");
}

TEST_CASE("a waiter retries what may pass and gives up on what will not") {
  using rlock::Failure;
  using rlock::worth_retrying;
  auto server = [](const char* code) { return Failure{Failure::Kind::server, "", code}; };
  CHECK(worth_retrying(Failure{Failure::Kind::connect, "connection refused"}));
  CHECK(worth_retrying(Failure{Failure::Kind::io, "reset"}));
  CHECK(worth_retrying(Failure{Failure::Kind::timeout, "timed out"}));
  for (const char* code : {"LOADING", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "READONLY", "BUSY"})
    CHECK_MESSAGE(worth_retrying(server(code)), code);
  for (const char* code : {"NOAUTH", "WRONGPASS", "NOPERM", "WRONGTYPE", "OOM", "ERR"})
    CHECK_MESSAGE(!worth_retrying(server(code)), code);
  CHECK(worth_retrying(Failure{Failure::Kind::server, "", "", Failure::Why::unknown_primary}));
  CHECK(!worth_retrying(Failure{Failure::Kind::connect, "", "", Failure::Why::tls_refused}));
  CHECK(!worth_retrying(Failure{Failure::Kind::protocol, "bad reply"}));
}

TEST_CASE("the pauses between tries at an unreachable Redis double, with jitter, up to the cap") {
  using namespace rlock;
  Backoff backoff;
  Millis step = k_backoff_first;
  for (int i = 0; i < 12; ++i) {
    Millis pause = backoff.next();
    CHECK(pause >= step / 2);
    CHECK(pause <= step);
    step = std::min(step * 2, k_backoff_cap);
  }
  CHECK(backoff.at_cap());
  backoff.reset();
  CHECK(!backoff.at_cap());
  CHECK(backoff.next() <= k_backoff_first);
}
