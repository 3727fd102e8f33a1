#include <doctest/doctest.h>

#include "util/text.h"

using rlock::is_assignment_word;
using rlock::shell_command_name;

TEST_CASE("json_string escapes and keeps UTF-8, replaces the rest") {
  CHECK(rlock::json_string("plain") == "\"plain\"");
  CHECK(rlock::json_string("a\"b\\c\n\x01") == "\"a\\\"b\\\\c\\u000a\\u0001\"");
  CHECK(rlock::json_string("J\xc3\xb6rg") == "\"J\xc3\xb6rg\"");
  CHECK(rlock::json_string("bad\xff") == "\"bad\xef\xbf\xbd\"");
  CHECK(rlock::json_string("cut\xe2\x82") == "\"cut\xef\xbf\xbd\xef\xbf\xbd\"");
  // Overlong forms, surrogates and past U+10FFFF are no sequence.
  CHECK(rlock::terminal_safe("\xe0\x80\x9b") == "\\xe0\\x80\\x9b");
  CHECK(rlock::terminal_safe("\xf0\x80\x80\x9b") == "\\xf0\\x80\\x80\\x9b");
  CHECK(rlock::terminal_safe("\xed\xa0\x80") == "\\xed\\xa0\\x80");
  CHECK(rlock::terminal_safe("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");
  CHECK(rlock::terminal_safe("\xe2\x82\xac \xf0\x9f\x99\x82") == "\xe2\x82\xac \xf0\x9f\x99\x82");
  // 0xf5 to 0xff lead nothing, whatever follows.
  CHECK(rlock::json_string("\xff\x80\x80") == "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
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

TEST_CASE("the program a shell line starts, never an assignment nor an argument") {
  CHECK(shell_command_name("PGPASSWORD=hunter2 psql -c 'select 1'") == "psql");
  CHECK(shell_command_name("A=1 B='two words' C=\"x y\" ./report.sh --secret s") == "./report.sh");
  CHECK(shell_command_name("  exec  FOO=bar  backup.sh") == "backup.sh");
  CHECK(shell_command_name("'/opt/my tools/run' arg") == "/opt/my tools/run");
  CHECK(shell_command_name("pg_dump|gzip") == "pg_dump");
  CHECK(shell_command_name("make;make install") == "make");
  for (const char* none :
       {"", "   ", "PGPASSWORD=hunter2", "X=1 Y=2", "(cd /tmp; ls)", "if true; then x; fi",
        "{ a; b; }", "$CMD arg", "`cmd`", "PW='unclosed psql", "< in cat", "! false"}) {
    CAPTURE(none);
    CHECK(shell_command_name(none) == "sh");
  }
  CHECK(shell_command_name("PW='a b' psql").find("b") == std::string::npos);
}

TEST_CASE("assignment words") {
  CHECK(is_assignment_word("PGPASSWORD=x"));
  CHECK(is_assignment_word("_a1="));
  CHECK_FALSE(is_assignment_word("=x"));
  CHECK_FALSE(is_assignment_word("1A=x"));
  CHECK_FALSE(is_assignment_word("./a=b"));
  CHECK_FALSE(is_assignment_word("psql"));
}

TEST_CASE("OutputEscaper keeps lines and tabs, escapes what drives a terminal, across pieces") {
  rlock::OutputEscaper e;
  CHECK(e.feed("a\tb\nc") == "a\tb\nc");
  CHECK(e.feed("\x1b[2J\x07") == "\\x1b[2J\\x07");
  CHECK(e.feed("\xc2\x9b") == "\\xc2\\x9b");  // C1 CSI
  CHECK(e.feed("bad\xff") == "bad\\xff");
  // A sequence cut between two pieces is judged whole.
  CHECK(e.feed("caf\xc3") == "caf");
  CHECK(e.feed("\xa9!") == "\xc3\xa9!");
  CHECK(e.feed("\xe2\x82") == "");
  CHECK(e.feed("\xac") == "\xe2\x82\xac");
  // A carriage return stays only before a newline, also one in the next piece.
  CHECK(e.feed("x\r") == "x");
  CHECK(e.feed("\ny\rz") == "\r\ny\\x0dz");
  // What is held back at the end is escaped.
  CHECK(e.feed("\xf0\x9f") == "");
  CHECK(e.finish() == "\\xf0\\x9f");
  CHECK(e.finish() == "");
}

TEST_CASE("bidirectional characters are escaped, a byte each, as C1 is") {
  // U+202E RIGHT-TO-LEFT OVERRIDE, U+2066 LEFT-TO-RIGHT ISOLATE, U+200F, U+061C.
  CHECK(rlock::terminal_safe("a\xe2\x80\xae"
                             "b") == "a\\xe2\\x80\\xaeb");
  CHECK(rlock::terminal_safe("\xe2\x81\xa6x\xe2\x81\xa9") == "\\xe2\\x81\\xa6x\\xe2\\x81\\xa9");
  CHECK(rlock::terminal_safe("\xe2\x80\x8f\xd8\x9c") == "\\xe2\\x80\\x8f\\xd8\\x9c");
  // Their neighbours stay: U+200A, U+202F, U+2065, U+061B (U+2029 is a paragraph separator).
  for (const char* kept : {"\xe2\x80\x8a", "\xe2\x80\xaf", "\xe2\x81\xa5", "\xd8\x9b"}) {
    CAPTURE(kept);
    CHECK(rlock::terminal_safe(kept) == kept);
  }
  // One character, however many escapes, when the text is cut.
  CHECK(rlock::terminal_safe("\xe2\x80\xae"
                             "abc",
                             2) == "\\xe2\\x80\\xaea...");
  rlock::OutputEscaper e;
  CHECK(e.feed("x\xe2\x80") == "x");
  CHECK(e.feed("\xaey\n") == "\\xe2\\x80\\xaey\n");
  CHECK(e.feed("\xc2\x85") == "\\xc2\\x85");
}

TEST_CASE("JSON escapes C1 and bidirectional characters, and carries bytes in base64") {
  CHECK(rlock::json_string("a\xe2\x80\xae\xc2\x9b") == "\"a\\u202e\\u009b\"");
  CHECK(rlock::json_escape_hidden("{\"k\":\"\xe2\x81\xa6\xc3\xa9\xc2\x85\"}") ==
        "{\"k\":\"\\u2066\xc3\xa9\\u0085\"}");
  CHECK(rlock::is_valid_utf8("J\xc3\xb6rg"));
  CHECK_FALSE(rlock::is_valid_utf8("a\xff"));
  CHECK_FALSE(rlock::is_valid_utf8("cut\xe2\x82"));
  CHECK(rlock::base64("") == "");
  CHECK(rlock::base64("f") == "Zg==");
  CHECK(rlock::base64("fo") == "Zm8=");
  CHECK(rlock::base64("foo") == "Zm9v");
  CHECK(rlock::base64("k\xff\xfe") == "a//+");
}

TEST_CASE("zero-width characters and line separators are escaped as hidden, in text and JSON") {
  // U+200B, U+200C, U+200D, U+FEFF, U+2028, U+2029: lock:a and lock:<ZWSP>a must read as two.
  CHECK(rlock::terminal_safe("lock:\xe2\x80\x8b"
                             "a") == "lock:\\xe2\\x80\\x8ba");
  CHECK(rlock::terminal_safe("\xe2\x80\x8c\xe2\x80\x8d\xef\xbb\xbf") ==
        "\\xe2\\x80\\x8c\\xe2\\x80\\x8d\\xef\\xbb\\xbf");
  CHECK(rlock::terminal_safe("a\xe2\x80\xa8"
                             "b\xe2\x80\xa9") == "a\\xe2\\x80\\xa8b\\xe2\\x80\\xa9");
  CHECK(rlock::json_string("\xe2\x80\x8b\xef\xbb\xbf\xe2\x80\xa8") == "\"\\u200b\\ufeff\\u2028\"");
  CHECK(rlock::json_escape_hidden("\"\xe2\x80\x8d\xe2\x80\xa9\"") == "\"\\u200d\\u2029\"");
  rlock::OutputEscaper e;
  CHECK(e.feed("x\xe2\x80\x8by\n") == "x\\xe2\\x80\\x8by\n");
}

TEST_CASE("a backslash is written \\\\ so that no text reads as an escape") {
  CHECK(rlock::terminal_safe("a\\x1b") == "a\\\\x1b");
  CHECK(rlock::terminal_safe("a\x1b") == "a\\x1b");
  CHECK(rlock::terminal_safe("a\\\x1b") == "a\\\\\\x1b");
  CHECK(rlock::terminal_safe("C:\\dir") == "C:\\\\dir");
  // A message made of pieces escaped already keeps their backslashes.
  CHECK(rlock::terminal_safe("k: a\\x1b\x07", std::string_view::npos, rlock::Backslashes::kept) ==
        "k: a\\x1b\\x07");
}

TEST_CASE("closest_word: git's 'did you mean', never a wrong or a harmful guess") {
  using rlock::closest_word;
  const std::vector<std::string> keys = {"redis",        "password", "password-file", "notify",
                                         "notify-after", "retry",    "retry-delay",   "kill-after",
                                         "status",       "stop",     "reset-period"};
  CHECK(closest_word("stauts", keys) == "status");
  CHECK(closest_word("stpo", keys) == "stop");
  // snake_case is the name itself, not a shorter one it starts with.
  CHECK(closest_word("password_file", keys) == "password-file");
  CHECK(closest_word("notify_after", keys) == "notify-after");
  CHECK(closest_word("kill_after", keys) == "kill-after");
  CHECK(closest_word("notify-aftr", keys) == "notify-after");
  CHECK(closest_word("retry-dealy", keys) == "retry-delay");
  // A word after a name: the longest name, and only when nothing is a typo away.
  CHECK(closest_word("redis-url", keys) == "redis");
  CHECK(closest_word("retry-delay-max", keys) == "retry-delay");
  // Too far, empty, huge, or as near to two: nothing.
  CHECK(!closest_word("reset-pxxxod", keys));  // 3 edits
  CHECK(!closest_word("", keys));
  CHECK(!closest_word(std::string(100, 'a'), keys));
  CHECK(!closest_word("xyzzy", keys));
  CHECK(!closest_word("stap", {"stop", "step"}));
  CHECK(!closest_word("status", {}));
}
