#include <doctest/doctest.h>
#include <map>
#include <string>
#include <vector>

#include "lock/lock.h"
#include "redis/cluster.h"
#include "redis/sentinel.h"
#include "util/error.h"

using namespace rlock;

TEST_CASE("key_slot is Redis Cluster's HASH_SLOT") {
  // Values from CLUSTER KEYSLOT on Redis 7.
  CHECK(key_slot("foo") == 12182);
  CHECK(key_slot("bar") == 5061);
  CHECK(key_slot("") == 0);
  CHECK(key_slot("{user1000}.following") == key_slot("{user1000}.followers"));
  CHECK(key_slot("{user1000}.following") == key_slot("user1000"));
  CHECK(key_slot("foo{}{bar}") == 8363);  // an empty tag: the whole key
  CHECK(key_slot("foo{{bar}}zap") == 4015);
  CHECK(key_slot("foo{{bar}}zap") == key_slot("{bar"));
}

TEST_CASE("every key of a lock shares the lock's slot") {
  for (const char* key : {"lock:daily", "job:{42}", "a{b}c", "{x}", "plain", "a{b", "{"}) {
    CAPTURE(key);
    for (const char* kind : {"fence", "queue", "alive", "sem", "holders", "shared", "shared-values",
                             "shared-waiters", "wake-0123"})
      CHECK(key_slot(helper_key(key, kind)) == key_slot(key));
    CHECK(key_slot(kept_output_key(key, "output-7")) == key_slot(key));
  }
}

TEST_CASE("no two keys share a helper key") {
  // Every key of up to four pieces that matter: braces, ':', the separators themselves, a kind,
  // a letter. Keys named like helpers are refused as KEY (cli.cpp), with their prefix.
  const std::vector<std::string> pieces{"a", "{", "}", ":", ":rlock:", ":rlock{}:", "fence"};
  std::vector<std::string> keys{""};
  for (size_t from = 0, length = 0; length < 4; ++length) {
    size_t to = keys.size();
    for (size_t i = from; i < to; ++i)
      for (const std::string& p : pieces) keys.push_back(keys[i] + p);
    from = to;
  }
  std::map<std::string, std::string> owner;  // helper -> "KEY / KIND"
  for (const std::string& key : keys) {
    if (key.empty() || is_helper_key(key)) continue;
    for (const char* kind : {"fence", "pause", "history", "wake-0123", "outputs", "output-7"}) {
      for (const std::string& name : {helper_key(key, kind), kept_output_key(key, kind)}) {
        auto [at, added] = owner.emplace(name, key + " / " + kind);
        CAPTURE(name);
        CAPTURE(key);
        CAPTURE(at->second);
        CHECK(added);
        CHECK(is_helper_key(name));
      }
    }
  }
  CHECK(owner.size() > 20000);
}

TEST_CASE("command_key") {
  CHECK(*command_key({"EVALSHA", "abc", "2", "k1", "k2", "arg"}) == "k1");
  CHECK(!command_key({"EVAL", "return 1", "0"}));
  CHECK(*command_key({"GET", "k"}) == "k");
  CHECK(*command_key({"BLPOP", "k", "1.5"}) == "k");
  CHECK(!command_key({"TIME"}));
  CHECK(!command_key({"WAIT", "1", "100"}));
  CHECK(!command_key({"SCAN", "0", "MATCH", "*"}));
}

TEST_CASE("parse_redirect") {
  auto moved = parse_redirect("MOVED 3999 127.0.0.1:6381");
  REQUIRE(moved);
  CHECK(!moved->ask);
  CHECK(moved->slot == 3999);
  CHECK(moved->host == "127.0.0.1");
  CHECK(moved->port == 6381);
  auto ask = parse_redirect("ASK 12 [::1]:7000");
  REQUIRE(ask);
  CHECK(ask->ask);
  CHECK(ask->host == "::1");
  CHECK(!parse_redirect("ERR unknown command"));
  CHECK(!parse_redirect("MOVED x 127.0.0.1:1"));
  CHECK(!parse_redirect("MOVED 99999 h:1"));
}

TEST_CASE("refused_for_now") {
  CHECK(refused_for_now("TRYAGAIN Multiple keys request during rehashing of slot"));
  CHECK(refused_for_now("CLUSTERDOWN Hash slot not served"));
  CHECK(refused_for_now("CLUSTERDOWN The cluster is down"));
  CHECK(refused_for_now("LOADING Redis is loading the dataset in memory"));
  // Redirects are followed, not waited out; what a retry cannot change ends the command.
  CHECK(!refused_for_now("MOVED 3999 127.0.0.1:6381"));
  CHECK(!refused_for_now("ASK 3999 127.0.0.1:6381"));
  CHECK(!refused_for_now("NOSCRIPT No matching script"));
  CHECK(!refused_for_now("WRONGTYPE Operation against a key holding the wrong kind of value"));
  // Raised inside a script, after what it wrote: not sent again.
  CHECK(!refused_for_now("ERR Error running script (call to f_1): @user_script:5: -TRYAGAIN x"));
  CHECK(!refused_for_now("TRYAGAINX"));
}

TEST_CASE("refusal_pause") {
  CHECK(refusal_pause(0) == Millis(20));
  CHECK(refusal_pause(1) == Millis(40));
  CHECK(refusal_pause(3) == Millis(160));
  CHECK(refusal_pause(4) == Millis(200));
  CHECK(refusal_pause(1000) == Millis(200));
}

TEST_CASE("Sentinel URLs") {
  CHECK(is_sentinel_url("redis-sentinel://h:26379/m"));
  CHECK(is_sentinel_url("rediss-sentinel://h/m"));
  CHECK(!is_sentinel_url("redis://h"));
  SentinelUrl u =
      parse_sentinel_url("redis-sentinel://app:hunter2@s1:26380,s2,[::1]/mymaster?db=2");
  REQUIRE(u.sentinels.size() == 3);
  CHECK(u.sentinels[0].host == "s1");
  CHECK(u.sentinels[0].port == 26380);
  CHECK(u.sentinels[1].port == 26379);
  CHECK(u.sentinels[2].host == "::1");
  CHECK(u.sentinels[2].port == 26379);
  CHECK(*u.sentinels[1].user == "app");
  CHECK(*u.sentinels[1].password == "hunter2");
  CHECK(u.master_name == "mymaster");
  CHECK(u.db == 2);
  CHECK(!u.tls);
  CHECK(u.redacted.find("hunter2") == std::string::npos);
  auto message = [](const char* text) {
    try {
      parse_sentinel_url(text);
    } catch (const Error& e) {
      CHECK(e.exit_status() == k_exit_config);
      return std::string(e.what());
    }
    return std::string("parsed");
  };
  CHECK(message("redis-sentinel://h:26379").find("no primary name") != std::string::npos);
  CHECK(message("redis-sentinel://h,,g/m").find("empty sentinel") != std::string::npos);
  CHECK(message("redis-sentinel://h:x/m").find("the port is not a number") != std::string::npos);
  CHECK(message("redis-sentinel://u:hunter2@h/m?x=1").find("hunter2") == std::string::npos);
}
