#include "util/duration.h"

#include <cmath>
#include <cstdint>
#include <cstdio>

namespace rlock {

namespace {

// Milliseconds in one UNIT, or 0 when UNIT is not a unit.
int64_t unit_millis(std::string_view unit) {
  if (unit == "ms") return 1;
  if (unit == "s") return 1000;
  if (unit == "m") return 60 * 1000;
  if (unit == "h") return 3600 * 1000;
  if (unit == "d") return 24 * 3600 * 1000;
  return 0;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_unit_char(char c) { return c == 'm' || c == 's' || c == 'h' || c == 'd'; }

// TEXT's value in milliseconds, unrounded and unbounded (infinity for a number too long to
// read), or nullopt when TEXT is not written as a duration.
std::optional<double> duration_millis(std::string_view text) {
  if (text.empty()) return std::nullopt;
  // Summed as a double and rounded once at the end, so "1.5s" + "0.25s" parts add up exactly.
  double total_ms = 0;
  size_t i = 0;
  int components = 0;
  while (i < text.size()) {
    size_t start = i;
    while (i < text.size() && is_digit(text[i])) ++i;
    size_t int_end = i;
    if (i < text.size() && text[i] == '.') {
      ++i;
      size_t frac_start = i;
      while (i < text.size() && is_digit(text[i])) ++i;
      if (i == frac_start) return std::nullopt;  // "1." is a typo, not 1
    }
    if (i == start) return std::nullopt;  // a unit with no number (".5" is flock's 0.5)
    size_t first = start;                       // leading zeros say nothing of the size
    while (first + 1 < int_end && text[first] == '0') ++first;
    double number;
    if (int_end - first > 18)
      number = HUGE_VAL;  // far beyond k_max_duration in any unit, and beyond what stod reads
    else if (i - first > 18)
      return std::nullopt;  // a fraction of needless precision (stod could underflow)
    else
      number = std::stod(std::string(text.substr(first, i - first)));
    size_t unit_start = i;
    while (i < text.size() && is_unit_char(text[i])) ++i;
    std::string_view unit = text.substr(unit_start, i - unit_start);
    int64_t scale;
    if (unit.empty()) {
      // A bare number is seconds, and only alone: "1h30" is ambiguous.
      if (i != text.size() || components > 0) return std::nullopt;
      scale = 1000;
    } else {
      scale = unit_millis(unit);
      if (scale == 0) return std::nullopt;
    }
    total_ms += number * static_cast<double>(scale);
    ++components;
  }
  return total_ms;
}

}  // namespace

std::optional<Millis> parse_duration(std::string_view text) {
  auto ms = duration_millis(text);
  if (!ms || *ms > static_cast<double>(k_max_duration.count())) return std::nullopt;
  return Millis(static_cast<int64_t>(*ms + 0.5));
}

bool duration_too_long(std::string_view text) {
  auto ms = duration_millis(text);
  return ms && *ms > static_cast<double>(k_max_duration.count());
}

std::string format_duration(Millis d) {
  int64_t ms = d.count();
  char buf[64];
  if (ms < 0) return "-" + format_duration(Millis(-ms));
  if (ms < 1000) {
    std::snprintf(buf, sizeof buf, "%lldms", static_cast<long long>(ms));
  } else if (ms < 60 * 1000) {
    // One decimal, never rounded up to "60.0s".
    long long tenths = ms / 100;
    if (tenths % 10 == 0)
      std::snprintf(buf, sizeof buf, "%llds", tenths / 10);
    else
      std::snprintf(buf, sizeof buf, "%lld.%llds", tenths / 10, tenths % 10);
  } else {
    // Two units, the second left out when it is 0: "3m12s", "5m", "2h5m", "30d".
    long long unit = ms < 3600 * 1000 ? 1000 : ms < 24LL * 3600 * 1000 ? 60000 : 3600000;
    const char* names = ms < 3600 * 1000 ? "ms" : ms < 24LL * 3600 * 1000 ? "hm" : "dh";
    long long n = ms / unit, per = unit == 3600000 ? 24 : 60;
    if (n % per == 0)
      std::snprintf(buf, sizeof buf, "%lld%c", n / per, names[0]);
    else
      std::snprintf(buf, sizeof buf, "%lld%c%lld%c", n / per, names[0], n % per, names[1]);
  }
  return buf;
}

}  // namespace rlock
