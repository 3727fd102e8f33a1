#include <doctest/doctest.h>

#include "util/byte_size.h"
#include "util/duration.h"

using namespace rlock;
using namespace std::chrono_literals;

TEST_CASE("durations people write") {
  CHECK(parse_duration("500ms") == 500ms);
  CHECK(parse_duration("30s") == 30s);
  CHECK(parse_duration("5m") == 5min);
  CHECK(parse_duration("1h30m") == 90min);
  CHECK(parse_duration("2d") == 48h);
  CHECK(parse_duration("1.5s") == 1500ms);
  CHECK(parse_duration("0.25s") == 250ms);
  CHECK(parse_duration("1m0.5s") == 60500ms);
  CHECK(parse_duration("0") == 0ms);
  SUBCASE("a bare number is seconds") {
    CHECK(parse_duration("30") == 30s);
    CHECK(parse_duration("2.5") == 2500ms);
  }
  SUBCASE("a leading dot, as flock -w .007 writes it") {
    CHECK(parse_duration(".5") == 500ms);
    CHECK(parse_duration(".007") == 7ms);
    CHECK(parse_duration(".5s") == 500ms);
  }
}

TEST_CASE("not durations") {
  for (const char* bad :
       {"",    " ",   "s",   "ms",      "-1s", "1x",  "1 s",  "1h30",  "1.s", ".s", "..5",
        "1e3", "abc", "1sm", "10years", "+5s", "5s ", "0x10", "1..5s", "nan", "inf"})
    CHECK_MESSAGE(!parse_duration(bad), bad);
  // A typo is no duration too long, whatever its size.
  for (const char* bad : {"1x", "100000dx", "1e400", "99999999999999999999x", "100000d5", ""})
    CHECK_MESSAGE(!duration_too_long(bad), bad);
}

TEST_CASE("durations too long to be meant are refused, never wrapped") {
  CHECK(parse_duration("3650d"));
  CHECK(!parse_duration("4000d"));
  CHECK(!parse_duration("99999999999999999999s"));
  CHECK(!parse_duration("9223372036854775807ms"));
  // Told from a typo, for the message ("at most 3660d"): the ceiling itself is in, 1ms more
  // is out, in every unit and however many digits.
  CHECK(format_duration(k_max_duration) == "3660d");
  CHECK(parse_duration("3660d") == k_max_duration);
  CHECK(!duration_too_long("3660d"));
  CHECK(!duration_too_long("0000000000000000000000005s"));
  CHECK(parse_duration("0000000000000000000000005s") == 5s);
  for (const char* big : {"100000d", "3660d1ms", "3661d", "87841h", "4000d", "1h3660d",
                          "99999999999999999999s", "9223372036854775807ms", "316224000001"})
    CHECK_MESSAGE(duration_too_long(big), big);
  for (const char* big : {"3660d1ms", "87841h", "316224000001"})
    CHECK_MESSAGE(!parse_duration(big), big);
}

TEST_CASE("format_duration is short and never rounds up a unit") {
  CHECK(format_duration(450ms) == "450ms");
  CHECK(format_duration(28400ms) == "28.4s");
  CHECK(format_duration(59999ms) == "59.9s");
  CHECK(format_duration(192s) == "3m12s");
  CHECK(format_duration(125min) == "2h5m");
  CHECK(format_duration(76h) == "3d4h");
  // A second unit of 0 is left out.
  CHECK(format_duration(300s) == "5m");
  CHECK(format_duration(120min) == "2h");
  CHECK(format_duration(720h) == "30d");
  CHECK(format_duration(0ms) == "0ms");
  CHECK(format_duration(20s) == "20s");
  CHECK(format_duration(1050ms) == "1s");
}

TEST_CASE("byte sizes as users write them and as rlock says them") {
  using rlock::format_byte_size;
  using rlock::parse_byte_size;
  CHECK(parse_byte_size("0") == 0u);
  CHECK(parse_byte_size("4096") == 4096u);
  CHECK(parse_byte_size("64k") == 65536u);
  CHECK(parse_byte_size("64KiB") == 65536u);
  CHECK(parse_byte_size("1M") == 1048576u);
  CHECK(parse_byte_size("1MB") == 1048576u);
  CHECK(parse_byte_size("2g") == 2147483648u);
  for (const char* bad : {"", "k", "1.5M", "1 M", "1Mi", "1T", "-1", "99999999999999999999"})
    CHECK_MESSAGE(!parse_byte_size(bad), bad);
  CHECK(!parse_byte_size("1025G"));  // past 1 TiB: a typo
  CHECK(format_byte_size(512) == "512 B");
  CHECK(format_byte_size(65536) == "64 KiB");
  CHECK(format_byte_size(1536) == "1.5 KiB");
  CHECK(format_byte_size(1048576) == "1 MiB");
  CHECK(format_byte_size(1048577) == "1.0 MiB");
  CHECK(format_byte_size(6900000) == "6.6 MiB");
}
