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

TEST_CASE("terminal_safe keeps text and UTF-8 on one line, escapes what could break it") {
  CHECK(rlock::terminal_safe("lock:daily J\xc3\xb6rg") == "lock:daily J\xc3\xb6rg");
  CHECK(rlock::terminal_safe("a\nb\rc\td") == "a\\x0ab\\x0dc\\x09d");
  CHECK(rlock::terminal_safe("\x1b[2Jx\x7f") == "\\x1b[2Jx\\x7f");
  CHECK(rlock::terminal_safe("c1\xc2\x9b") == "c1\\xc2\\x9b");  // U+009B, CSI to some terminals
  CHECK(rlock::terminal_safe("bad\xff\xfe") == "bad\\xff\\xfe");
  CHECK(rlock::terminal_safe("cut\xe2\x82") == "cut\\xe2\\x82");
  CHECK(rlock::terminal_safe("") == "");
}
