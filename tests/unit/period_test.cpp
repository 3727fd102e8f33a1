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

TEST_CASE("an hour is an hour of real time, also on the nights the clocks change") {
  constexpr int64_t h = 3600 * 1000;
  // Berlin, 2027-10-31: at 03:00 CEST (01:00Z) the clocks go back to 02:00 CET, so 02:10 CEST
  // (00:10Z) and 02:50 CET (01:50Z), an hour and 40 minutes apart, both read 02:xx. Each is in
  // an hour of its own: the first named as every hour is, the second with its UTC offset.
  PeriodSlot summer = slot("hour", 1824941400000, "Europe/Berlin");
  CHECK(summer.name == "2027-10-31T02");
  CHECK(summer.start_ms == 1824940800000);  // 00:00Z, 02:00 CEST
  CHECK(summer.end_ms == 1824940800000 + h);
  PeriodSlot winter = slot("hour", 1824947400000, "Europe/Berlin");
  CHECK(winter.name == "2027-10-31T02+01:00");
  CHECK(winter.start_ms == 1824944400000);  // 01:00Z, 02:00 CET
  CHECK(winter.end_ms == 1824944400000 + h);
  // The first hour's last millisecond and the second's first.
  CHECK(slot("hour", 1824944399999, "Europe/Berlin").name == "2027-10-31T02");
  CHECK(slot("hour", 1824944400000, "Europe/Berlin").name == "2027-10-31T02+01:00");
  // Then 03:00 CET, an hour as any other.
  CHECK(slot("hour", 1824948000000, "Europe/Berlin").name == "2027-10-31T03");
  CHECK(slot("hour", 1824948000000, "Europe/Berlin").start_ms == 1824948000000);
  // A day stays a calendar day: that one has 25 hours.
  PeriodSlot day = slot("day", 1824947400000, "Europe/Berlin");
  CHECK(day.name == "2027-10-31");
  CHECK(day.start_ms == 1824933600000);  // 2027-10-30T22:00Z
  CHECK(day.end_ms == 1825023600000);    // 2027-10-31T23:00Z
  // New York goes back from 02:00 EDT to 01:00 EST (2027-11-07): a zone west of UTC.
  CHECK(slot("hour", 1825565400000, "America/New_York").name == "2027-11-07T01");
  CHECK(slot("hour", 1825569000000, "America/New_York").name == "2027-11-07T01-05:00");
  CHECK(slot("hour", 1825569000000, "America/New_York").start_ms == 1825567200000);

  // Berlin, 2027-03-28: at 02:00 CET (01:00Z) the clocks go forward to 03:00 CEST; 01:xx CET
  // ends at 01:00Z, and 03:xx CEST starts there.
  PeriodSlot before = slot("hour", 1806193800000, "Europe/Berlin");
  CHECK(before.name == "2027-03-28T01");
  CHECK(before.start_ms == 1806192000000);
  CHECK(before.end_ms == 1806195600000);
  PeriodSlot after = slot("hour", 1806196200000, "Europe/Berlin");
  CHECK(after.name == "2027-03-28T03");
  CHECK(after.start_ms == 1806195600000);
  CHECK(after.end_ms == 1806195600000 + h);

  // Fixed lengths count from the epoch, in UTC: the clocks' change is nothing to them.
  CHECK(slot("15m", 1824941400000, "Europe/Berlin").name == "2027-10-31T00:00:00Z");
  CHECK(slot("15m", 1824947400000, "Europe/Berlin").name == "2027-10-31T01:45:00Z");
  CHECK(slot("1h", 1824947400000, "Europe/Berlin").start_ms == 1824944400000);
}

TEST_CASE("known_time_zone: tzdata names and UTC, never a path") {
  CHECK(known_time_zone("UTC"));
  CHECK(known_time_zone("Europe/Berlin"));
  for (const char* bad : {"", "Mars/Olympus_Mons", "/etc/passwd", "../../etc/passwd", "Europe"})
    CHECK_MESSAGE(!known_time_zone(bad), bad);
}
