#include "util/wall_time.h"

#include <charconv>
#include <cstdint>
#include <cstdio>

namespace rlock {

std::string format_rfc3339(WallTime t) {
  // Calendar arithmetic, not gmtime_r: glibc's reads /etc/localtime first (tzset), on every
  // run's way to its first Redis command.
  using namespace std::chrono;
  sys_days day = floor<days>(t);
  year_month_day ymd(day);
  hh_mm_ss<milliseconds> time(t - day);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02d.%03dZ", int(ymd.year()),
                unsigned(ymd.month()), unsigned(ymd.day()), int(time.hours().count()),
                int(time.minutes().count()), int(time.seconds().count()),
                int(time.subseconds().count()));
  return buf;
}

std::optional<WallTime> parse_rfc3339(std::string_view text) {
  // Exactly the form format_rfc3339 writes: YYYY-MM-DDTHH:MM:SS.mmmZ
  if (text.size() != 24 || text[4] != '-' || text[7] != '-' || text[10] != 'T' || text[13] != ':' ||
      text[16] != ':' || text[19] != '.' || text[23] != 'Z')
    return std::nullopt;
  auto num = [&](size_t pos, size_t len) -> std::optional<int64_t> {
    int64_t v = 0;
    std::string_view digits = text.substr(pos, len);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
    return v;
  };
  auto y = num(0, 4), mo = num(5, 2), d = num(8, 2), h = num(11, 2), mi = num(14, 2),
       s = num(17, 2), ms = num(20, 3);
  if (!y || !mo || !d || !h || !mi || !s || !ms) return std::nullopt;
  if (*mo < 1 || *mo > 12 || *d < 1 || *d > 31 || *h > 23 || *mi > 59 || *s > 60)
    return std::nullopt;
  using namespace std::chrono;
  year_month_day ymd{year(static_cast<int>(*y)), month(static_cast<unsigned>(*mo)),
                     day(static_cast<unsigned>(*d))};
  if (!ymd.ok()) return std::nullopt;
  auto t = sys_days(ymd) + hours(*h) + minutes(*mi) + seconds(*s) + milliseconds(*ms);
  return time_point_cast<milliseconds>(t);
}

}  // namespace rlock
