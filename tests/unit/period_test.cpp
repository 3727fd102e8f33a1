#include <doctest/doctest.h>

#include "util/period.h"

using namespace rlock;

namespace {

PeriodSlot slot(const char* period, int64_t now_ms, std::optional<std::string> tz = {}) {
  auto p = parse_period(period);
  REQUIRE(p);
  return period_slot(*p, tz, now_ms);
}

// 2026-12-01T04:05:33.123Z, a Tuesday.
constexpr int64_t k_tuesday = 1796097933123;

}  // namespace

TEST_CASE("parse_period: calendar units, and fixed lengths of whole seconds") {
  CHECK(parse_period("hour")->unit == Period::Unit::hour);
  CHECK(parse_period("daily")->unit == Period::Unit::day);
  CHECK(parse_period("week")->unit == Period::Unit::week);
  CHECK(parse_period("monthly")->unit == Period::Unit::month);
  auto fixed = parse_period("90m");
  REQUIRE(fixed);
  CHECK(fixed->unit == Period::Unit::fixed);
  CHECK(fixed->length == Millis(90 * 60 * 1000));
  for (const char* bad : {"", "fortnight", "0s", "1500ms", "999ms", "-1d", "Hour"})
    CHECK_MESSAGE(!parse_period(bad), bad);
}

TEST_CASE("fixed periods are windows from the epoch, named by their start") {
  PeriodSlot s = slot("1h", k_tuesday);
  CHECK(s.name == "2026-12-01T04:00:00Z");
  CHECK(s.start_ms == 1796097600000);
  CHECK(s.end_ms == 1796097600000 + 3600 * 1000);
  // The last millisecond of a window is still in it; the next one starts the next.
  CHECK(slot("1h", s.end_ms - 1).name == s.name);
  CHECK(slot("1h", s.end_ms).name == "2026-12-01T05:00:00Z");
}

TEST_CASE("calendar periods in UTC") {
  CHECK(slot("hour", k_tuesday).name == "2026-12-01T04");
  CHECK(slot("hour", k_tuesday).end_ms == 1796097600000 + 3600 * 1000);
  CHECK(slot("day", k_tuesday).name == "2026-12-01");
  CHECK(slot("hour", k_tuesday).start_ms == 1796097600000);
  CHECK(slot("day", k_tuesday).start_ms == 1796083200000);
  // Its week started on Monday 2026-11-30, its month on 2026-12-01.
  CHECK(slot("week", k_tuesday).start_ms == 1796083200000 - 86400 * 1000);
  CHECK(slot("month", k_tuesday).start_ms == 1796083200000);
  // ISO weeks start on Monday: the Tuesday's week ends on Monday 2026-12-07.
  CHECK(slot("week", k_tuesday).name == "2026-W49");
  CHECK(slot("week", k_tuesday).end_ms == 1796601600000);
  // The year's last second: December's month ends with the year; its ISO week is 2026's 53rd.
  CHECK(slot("month", 1798761599000).name == "2026-12");
  CHECK(slot("month", 1798761599000).end_ms == 1798761600000);
  CHECK(slot("week", 1798761599000).name == "2026-W53");
}

TEST_CASE("calendar periods in a time zone, across a DST change") {
  // 04:05Z is 05:05 in Berlin (UTC+1 in December).
  CHECK(slot("hour", k_tuesday, "Europe/Berlin").name == "2026-12-01T05");
  CHECK(slot("hour", k_tuesday, "Europe/Berlin").end_ms == 1796097600000 + 3600 * 1000);
  // 2026-03-29 has 23 hours in Berlin: its day ends at 22:00Z.
  PeriodSlot spring = slot("day", 1774778400000, "Europe/Berlin");
  CHECK(spring.name == "2026-03-29");
  CHECK(spring.end_ms == 1774821600000);
  CHECK(spring.start_ms == 1774738800000);  // midnight in Berlin, still UTC+1: 23:00Z
  // 2026-12-01T23:30Z is already the 2nd in Berlin: its day began at 23:00Z.
  PeriodSlot late = slot("day", 1796167800000, "Europe/Berlin");
  CHECK(late.name == "2026-12-02");
  CHECK(late.start_ms == 1796166000000);
}

TEST_CASE("known_time_zone: tzdata names and UTC, never a path") {
  CHECK(known_time_zone("UTC"));
  CHECK(known_time_zone("Europe/Berlin"));
  for (const char* bad : {"", "Mars/Olympus_Mons", "/etc/passwd", "../../etc/passwd", "Europe"})
    CHECK_MESSAGE(!known_time_zone(bad), bad);
}
