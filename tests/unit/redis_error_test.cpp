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
  CHECK(error_code("NOPERM this user has no permissions to run the 'evalsha' command") == "NOPERM");
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

// ACL denials as each server words them (from their sources: Redis 6.2 scripting.c
// luaRedisGenericCommand, 7.0 script.c scriptVerifyACL and server.c processCommand, 7.2 and 7.4
// acl.c getAclErrorMessage, Valkey 8.0 the same as 7.4), and as test_credentials.py meets them.
TEST_CASE("an ACL denial is named in every server's wording") {
  using rlock::denied_in_script;
  // The script's line 2 calls TIME.
  constexpr rlock::Script script("local k = KEYS[1]\nlocal now = redis.call('time')\n", "f");
  const rlock::Argv keys{"other", "{other}:rlock:fence"};
  const std::string time =
      "the ACL user may not run TIME, which rlock's scripts call: rlock-redis(7) "
      "\"Least privilege\" has the ACL rules rlock needs";
  const std::string key_patterns =
      "the ACL user's key patterns must allow every key of this lock: other, {other}:rlock:fence";
  SUBCASE("a command inside the script") {
    // Redis 7.0: where, not what.
    CHECK(denied_in_script(
              script, keys,
              "ERR The user executing the script can't run this command or subcommand "
              "script: 3f6c0b2a4a8e1f0d2c7b9e5a1d3c4b6a7f8e9d0c, on @user_script:2.") == time);
    // Redis 6.2: wrapped, the place twice, once with a space.
    CHECK(denied_in_script(script, keys,
                           "ERR Error running script (call to f_3f6c): @user_script:2: "
                           "@user_script: 2: The user executing the script can't run this command "
                           "or subcommand ") == time);
    // Redis 7.2, 7.4 and Valkey 8: what, not where.
    for (const char* error :
         {"ERR ACL failure in script: User notime has no permissions to run the 'time' command "
          "script: 3f6c0b2a4a8e1f0d2c7b9e5a1d3c4b6a7f8e9d0c, on @user_script:2.",
          "ERR ACL failure in script: User notime has no permissions to run the 'time' command"})
      CHECK_MESSAGE(denied_in_script(script, keys, error) == time, error);
    // A subcommand is named as a user types it.
    CHECK(denied_in_script(script, keys,
                           "ERR ACL failure in script: User u has no permissions to run the "
                           "'config|get' command script: f, on @user_script:9.") ==
          "the ACL user may not run CONFIG GET, which rlock's scripts call: rlock-redis(7) \"Least "
          "privilege\" has the ACL rules rlock needs");
  }
  SUBCASE("a key") {
    for (const char* error :
         {// Redis 6.x and 7.0, the script's KEYS
          "NOPERM this user has no permissions to access one of the keys used as arguments",
          // Redis 7.2, 7.4, Valkey 8, the script's KEYS
          "NOPERM No permissions to access a key",
          // Redis 7.2, 7.4, Valkey 8, inside the script
          "ERR ACL failure in script: No permissions to access a key script: f, on "
          "@user_script:2.",
          // Redis 7.0, inside the script
          "ERR The user executing the script can't access at least one of the keys mentioned in "
          "the command arguments script: f, on @user_script:2."})
      CHECK_MESSAGE(denied_in_script(script, keys, error) == key_patterns, error);
  }
  SUBCASE("not a denial inside a script") {
    // EVALSHA itself refused is no script's doing: the plain NOPERM hint says it.
    CHECK(!denied_in_script(script, keys,
                            "NOPERM this user has no permissions to run the 'evalsha' command"));
    CHECK(!denied_in_script(script, keys,
                            "NOPERM User u has no permissions to run the 'evalsha' command"));
    CHECK(!denied_in_script(script, keys,
                            "WRONGTYPE Operation against a key holding the wrong "
                            "kind of value"));
    // A line that calls nothing names nothing.
    CHECK(!denied_in_script(script, keys,
                            "ERR The user executing the script can't run this command or "
                            "subcommand script: f, on @user_script:1."));
  }
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
  // rlock's own process out of descriptors, processes or memory: no news of Redis.
  CHECK(!worth_retrying(Failure{Failure::Kind::connect, "", "", Failure::Why::out_of_resources}));
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
