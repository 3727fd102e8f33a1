#include <doctest/doctest.h>

#include "redis/redis_url.h"
#include "util/error.h"

using namespace rlock;

TEST_CASE("redis:// URLs") {
  auto u = parse_redis_url("redis://127.0.0.1:6380/2");
  CHECK(u.scheme == RedisUrl::Scheme::tcp);
  CHECK(u.host == "127.0.0.1");
  CHECK(u.port == 6380);
  CHECK(u.db == 2);
  CHECK(!u.user);
  CHECK(!u.password);

  u = parse_redis_url("redis://cache.internal");
  CHECK(u.port == 6379);
  CHECK(u.db == 0);

  u = parse_redis_url("redis://[::1]:7000");
  CHECK(u.host == "::1");
  CHECK(u.port == 7000);
  CHECK(u.endpoint() == "[::1]:7000");
}

TEST_CASE("users and passwords, redacted everywhere") {
  auto u = parse_redis_url("redis://app:s3cr%40t@h:1/0");
  CHECK(*u.user == "app");
  CHECK(*u.password == "s3cr@t");
  CHECK(u.redacted() == "redis://app:***@h:1");
  u = parse_redis_url("redis://:pw@h");
  CHECK(!u.user);
  CHECK(*u.password == "pw");
  CHECK(u.redacted() == "redis://:***@h:6379");
  u = parse_redis_url("redis://pw@h");
  CHECK(*u.password == "pw");
  CHECK(redact_url_text("redis://u:topsecret@h:1") == "redis://u:***@h:1");
  CHECK(redact_url_text("redis://topsecret@h:1") == "redis://***@h:1");
  CHECK(redact_url_text("redis://h:1") == "redis://h:1");
  // A user with no password in the URL (it comes from elsewhere): nothing to hide.
  CHECK(redact_url_text("redis://app:@h:1") == "redis://app:@h:1");
  CHECK(redact_url_text("redis://:@h:1") == "redis://:***@h:1");
  CHECK(redact_url_text("redis://a/b:@h:1") == "redis://***@h:1");
}

// The message of the Error that parsing TEXT throws.
std::string url_error(const std::string& text) {
  try {
    parse_redis_url(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST_CASE("a URL with its password masked in place, for rlock's own argv") {
  using rlock::masked_url_text;
  CHECK(masked_url_text("redis://u:topsecret@h:1") == "redis://u:***@h:1");
  CHECK(masked_url_text("--redis=redis://topsecret@h:1") == "--redis=redis://***@h:1");
  CHECK(masked_url_text("rediss://app:p@ss@h") == "rediss://app:***@h");
  CHECK(masked_url_text("redis://a/b:c@h:1") == "redis://***@h:1");
  CHECK(masked_url_text("redis-sentinel://:pw@s1,s2/m") == "redis-sentinel://:**@s1,s2/m");
  // Three stars whatever the length; a shorter password, one star a byte.
  CHECK(masked_url_text("redis://u:" + std::string(40, 'x') + "@h") == "redis://u:***@h");
  CHECK(masked_url_text("redis://u:x@h") == "redis://u:*@h");
  // A password typed without its "@host" reads as a port, in each address.
  CHECK(masked_url_text("redis://h:1,u:secret/0") == "redis://h:1,u:***/0");
  for (const char* kept : {"redis://h:1", "redis://app:@h:1", "unix:///run/r.sock", "key"}) {
    CAPTURE(kept);
    CHECK(masked_url_text(kept) == kept);
  }
}

TEST_CASE("a URL without its password, for the command's environment") {
  CHECK(without_password("redis://app:s3cret@h:6379/2") == "redis://app:@h:6379/2");
  CHECK(without_password("redis://s3cret@h") == "redis://h");
  CHECK(without_password("redis://:s3cret@h") == "redis://h");
  CHECK(without_password("rediss://app:p@ss@h") == "rediss://app:@h");
  CHECK(without_password("redis://h:6379") == "redis://h:6379");
  CHECK(without_password("unix:///run/redis.sock") == "unix:///run/redis.sock");
  CHECK(without_password("redis-sentinel://app:pw@s1,s2/m") == "redis-sentinel://app:@s1,s2/m");
}

TEST_CASE("passwords with URL-special characters: the last '@' ends them") {
  auto u = parse_redis_url("redis://app:p@ss:w0rd@h:1/2");
  CHECK(*u.user == "app");
  CHECK(*u.password == "p@ss:w0rd");
  CHECK(u.host == "h");
  CHECK(u.db == 2);
  // Unencoded '/', '?', '#' and a stray '%': an error that says how to encode, and shows no
  // part of the user or password.
  for (std::string pw : {"ab/cd", "ab?cd", "ab#cd", "ab%zzcd", "ab%"}) {
    CAPTURE(pw);
    std::string message = url_error("redis://admin:" + pw + "@h:1/0");
    CHECK(message.find("percent-encode") != std::string::npos);
    CHECK(message.find("'redis://***@h:1/0'") != std::string::npos);
    CHECK(message.find("admin") == std::string::npos);
    CHECK(message.find("ab") == std::string::npos);
    CHECK(message.find("cd") == std::string::npos);
  }
  CHECK(url_error("redis://:a/b@h").find("%2F") != std::string::npos);
  // Any error after the password, too.
  CHECK(url_error("redis://:s3cr3t@h:0").find("s3cr3t") == std::string::npos);
  CHECK(url_error("redis:s3cr3t@h").find("s3cr3t") == std::string::npos);
  CHECK(redact_url_text("redis://u:a/b@h:1") == "redis://u:***@h:1");
  CHECK(redact_url_text("redis://a/b:c@h:1") == "redis://***@h:1");
  CHECK(without_userinfo("redis://u:pw@h:1") == "redis://***@h:1");
  // No '@': a port that is no number may be a password whose "@host" was forgotten.
  CHECK(without_userinfo("redis://u:pw") == "redis://u:***");
  CHECK(without_userinfo("redis://:pw/0") == "redis://:***/0");
  CHECK(without_userinfo("redis://h:6379/0") == "redis://h:6379/0");
  CHECK(without_userinfo("redis://[::1]:pw") == "redis://[::1]:***");
  CHECK(without_userinfo("redis-sentinel://a:1,b:pw,c/m") == "redis-sentinel://a:1,b:***,c/m");
  CHECK(without_userinfo("redis://,:") == "redis://,:***");
  CHECK(without_userinfo("nonsense-pw@h") == "***@h");
}

TEST_CASE("an unknown scheme lists every scheme") {
  std::string message = url_error("http://h");
  for (const char* scheme :
       {"redis://", "rediss://", "unix://", "redis-sentinel://", "rediss-sentinel://"})
    CHECK(message.find(scheme) != std::string::npos);
}

TEST_CASE("unix sockets") {
  auto u = parse_redis_url("unix:///run/redis/redis.sock?db=3");
  CHECK(u.scheme == RedisUrl::Scheme::unix_socket);
  CHECK(u.path == "/run/redis/redis.sock");
  CHECK(u.db == 3);
  CHECK(u.redacted() == "unix:///run/redis/redis.sock?db=3");
}

TEST_CASE("bad URLs name the part that is wrong and never the password") {
  auto message = [](const char* text) {
    try {
      parse_redis_url(text);
    } catch (const Error& e) {
      CHECK(e.exit_status() == k_exit_config);
      return std::string(e.what());
    }
    return std::string("parsed");
  };
  CHECK(message("localhost:6379").find("expected redis://") != std::string::npos);
  CHECK(message("http://h").find("unknown scheme 'http'") != std::string::npos);
  CHECK(message("redis://h:99999").find("port '99999'") != std::string::npos);
  CHECK(message("redis://h:").find("empty port") != std::string::npos);
  CHECK(message("redis://h/x").find("database 'x'") != std::string::npos);
  CHECK(message("redis://").find("no host") != std::string::npos);
  CHECK(message("redis://::1:6379").find("brackets") != std::string::npos);
  CHECK(message("unix://relative.sock").find("absolute") != std::string::npos);
  CHECK(message("redis://h h").find("a character no host name") != std::string::npos);
  CHECK(message("redis://\x1b[31mh").find("a character no host name") != std::string::npos);
  CHECK(message("redis://\xff").find("a character no host name") != std::string::npos);
  CHECK(message(("redis://" + std::string(254, 'h')).c_str()).find("253") != std::string::npos);
  CHECK(message("redis://[fe80::1%eth0]:6379") == "parsed");
  CHECK(message("redis://redis-1.prod_db.example:6379") == "parsed");
  std::string m = message("redis://u:hunter2@h:notaport");
  CHECK(m.find("hunter2") == std::string::npos);
  CHECK(m.find("***") != std::string::npos);
}

TEST_CASE("a Cluster's seeds in one URL") {
  auto seeds = parse_redis_seeds("rediss://app:p%2Cw@a:7000,b,[::1]:7002/0");
  REQUIRE(seeds.size() == 3);
  CHECK(seeds[0].host == "a");
  CHECK(seeds[0].port == 7000);
  CHECK(seeds[1].host == "b");
  CHECK(seeds[1].port == 6379);
  CHECK(seeds[2].host == "::1");
  for (const auto& s : seeds) {
    CHECK(s.scheme == RedisUrl::Scheme::tls);
    CHECK(*s.user == "app");
    CHECK(*s.password == "p,w");  // a comma in the password is no address
  }
  CHECK(parse_redis_seeds("redis://h:1").size() == 1);
  CHECK(parse_redis_seeds("unix:///run/a,b.sock").front().path == "/run/a,b.sock");
  CHECK(parse_redis_seeds("redis://u:a,b@h:1").front().password == "a,b");
  CHECK_THROWS_WITH_AS(parse_redis_seeds("redis://a:1,,b:2"),
                       "bad Redis URL 'redis://a:1,,b:2': an empty address in a list of "
                       "Cluster seeds",
                       Error);
  CHECK_THROWS_AS(parse_redis_seeds("redis://a:1,b:x"), Error);
}
