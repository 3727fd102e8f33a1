#include "util/period.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "util/wall_time.h"

namespace rlock {

namespace {

std::string two(int v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%02d", v);
  return buf;
}

// Calendar arithmetic in zone TZ (or UTC): the process's TZ is set for it. rlock calls this
// before any thread or child exists.
class ZoneScope {
public:
  explicit ZoneScope(const std::optional<std::string>& tz) {
    if (const char* old = std::getenv("TZ")) old_ = old;
    ::setenv("TZ", tz ? tz->c_str() : "UTC", 1);
    ::tzset();
  }
  ~ZoneScope() {
    if (old_)
      ::setenv("TZ", old_->c_str(), 1);
    else
      ::unsetenv("TZ");
    ::tzset();
  }

private:
  std::optional<std::string> old_;
};

// "+01:00", "-05:00": a UTC offset of SECONDS east.
std::string utc_offset(long seconds) {
  char sign = seconds < 0 ? '-' : '+';
  long minutes = (seconds < 0 ? -seconds : seconds) / 60;
  return sign + two(static_cast<int>(minutes / 60)) + ":" + two(static_cast<int>(minutes % 60));
}

// The hour NOW is in, in the zone in force: an hour of real time from when the local clock last
// read a whole hour (where clocks go forward, the hour before the gap ends where the next
// begins). Where they go back, one hour of the clock is lived twice, and each time is an hour of
// its own: the first is named as every hour is (as rlock named it before, so the records in
// Redis keep their names), the second with its UTC offset, "2027-10-31T02+01:00".
PeriodSlot hour_slot(time_t now) {
  tm local{};
  localtime_r(&now, &local);
  time_t start = now - local.tm_min * 60 - local.tm_sec;
  time_t just_before = start - 1;
  tm before{};
  localtime_r(&just_before, &before);
  std::string name = std::to_string(local.tm_year + 1900) + "-" + two(local.tm_mon + 1) + "-" +
                     two(local.tm_mday) + "T" + two(local.tm_hour);
  if (before.tm_year == local.tm_year && before.tm_yday == local.tm_yday &&
      before.tm_hour == local.tm_hour)
    name += utc_offset(local.tm_gmtoff);
  return {name, static_cast<int64_t>(start) * 1000, (static_cast<int64_t>(start) + 3600) * 1000};
}

}  // namespace

std::optional<Period> parse_period(std::string_view text) {
  if (text == "hour" || text == "hourly") return Period{Period::Unit::hour, Millis(0)};
  if (text == "day" || text == "daily") return Period{Period::Unit::day, Millis(0)};
  if (text == "week" || text == "weekly") return Period{Period::Unit::week, Millis(0)};
  if (text == "month" || text == "monthly") return Period{Period::Unit::month, Millis(0)};
  auto d = parse_duration(text);
  if (!d || *d < Millis(1000) || d->count() % 1000 != 0) return std::nullopt;
  return Period{Period::Unit::fixed, *d};
}

bool known_time_zone(const std::string& zone) {
  if (zone == "UTC") return true;
  if (zone.empty() || zone.front() == '/' || zone.find("..") != std::string::npos) return false;
  const char* dir = std::getenv("TZDIR");
  std::string path = std::string(dir && *dir ? dir : "/usr/share/zoneinfo") + "/" + zone;
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

PeriodSlot period_slot(const Period& period, const std::optional<std::string>& tz, int64_t now_ms) {
  if (period.unit == Period::Unit::fixed) {
    int64_t length = period.length.count();
    int64_t start = now_ms - (now_ms % length + length) % length;
    std::string name = format_rfc3339(WallTime(Millis(start)));
    name = name.substr(0, 19) + "Z";  // whole seconds: a period is at least one
    return {name, start, start + length};
  }
  ZoneScope zone(tz);
  time_t now = static_cast<time_t>(now_ms / 1000);
  if (period.unit == Period::Unit::hour) return hour_slot(now);
  tm local{};
  localtime_r(&now, &local);
  tm start = local;
  start.tm_sec = 0;
  start.tm_min = 0;
  start.tm_isdst = -1;
  tm end = start;
  std::string name = std::to_string(local.tm_year + 1900) + "-" + two(local.tm_mon + 1);
  switch (period.unit) {
  case Period::Unit::hour: break;  // hour_slot
  case Period::Unit::day:
    name += "-" + two(local.tm_mday);
    start.tm_hour = 0;
    end.tm_hour = 0;
    end.tm_mday += 1;
    break;
  case Period::Unit::week: {
    char buf[16];
    std::strftime(buf, sizeof buf, "%G-W%V", &local);  // ISO weeks start on Monday
    name = buf;
    start.tm_hour = 0;
    start.tm_mday -= (local.tm_wday + 6) % 7;
    end.tm_hour = 0;
    end.tm_mday += 7 - (local.tm_wday + 6) % 7;
    break;
  }
  case Period::Unit::month:
    start.tm_hour = 0;
    start.tm_mday = 1;
    end.tm_hour = 0;
    end.tm_mday = 1;
    end.tm_mon += 1;
    break;
  case Period::Unit::fixed: break;
  }
  time_t end_time = std::mktime(&end);  // normalises, and knows the zone's DST changes
  time_t start_time = std::mktime(&start);
  return {name, static_cast<int64_t>(start_time) * 1000, static_cast<int64_t>(end_time) * 1000};
}

}  // namespace rlock
