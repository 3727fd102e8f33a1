#include <doctest/doctest.h>

#include "text.h"

TEST_CASE("json_string escapes and keeps UTF-8, replaces the rest") {
  CHECK(rlock::json_string("plain") == "\"plain\"");
  CHECK(rlock::json_string("a\"b\\c\n\x01") == "\"a\\\"b\\\\c\\u000a\\u0001\"");
  CHECK(rlock::json_string("J\xc3\xb6rg") == "\"J\xc3\xb6rg\"");
  CHECK(rlock::json_string("bad\xff") == "\"bad\xef\xbf\xbd\"");
  CHECK(rlock::json_string("cut\xe2\x82") == "\"cut\xef\xbf\xbd\xef\xbf\xbd\"");
}

TEST_CASE("percent_decode") {
  CHECK(*rlock::percent_decode("a%40b%2F") == "a@b/");
  CHECK(!rlock::percent_decode("%4"));
  CHECK(!rlock::percent_decode("%zz"));
}
