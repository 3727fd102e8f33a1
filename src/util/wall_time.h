// Wall-clock time as rlock writes it (lock values, history, period slots): RFC 3339 in UTC
// with milliseconds, 2026-11-30T03:12:00.123Z. Pure functions. Intervals are measured on the
// steady clock (clock.h), never with these.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace rlock {

using WallTime = std::chrono::time_point<std::chrono::system_clock, std::chrono::milliseconds>;

std::string format_rfc3339(WallTime t);
// Exactly the form format_rfc3339() writes; nothing for anything else.
std::optional<WallTime> parse_rfc3339(std::string_view text);

}  // namespace rlock
