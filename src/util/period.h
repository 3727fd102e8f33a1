// The periods of --once-per, computed from the Redis server's clock. No I/O but tzdata:
// calendar arithmetic in a zone sets TZ for a moment, so call it before any thread exists.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "util/duration.h"

namespace rlock {

// --once-per: a calendar unit (hour, day, week, month, in UTC or --tz), or a fixed length of at
// least a second, counted in windows from the Unix epoch. An hour is one of real time, also on
// the nights the clocks change (rlock-run(1), --once-per); a day is a calendar one.
struct Period {
  enum class Unit { fixed, hour, day, week, month } unit = Unit::fixed;
  Millis length{0};  // fixed only
};
std::optional<Period> parse_period(std::string_view text);
// Whether ZONE names a time zone this host knows (tzdata), or is UTC.
bool known_time_zone(const std::string& zone);

// The period that server time NOW_MS falls in: its name, when it started and when it ends.
struct PeriodSlot {
  std::string name;
  int64_t start_ms = 0;
  int64_t end_ms = 0;
};
PeriodSlot period_slot(const Period& period, const std::optional<std::string>& tz, int64_t now_ms);

}  // namespace rlock
