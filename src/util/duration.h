// Durations as users write them: 500ms, 30s, 5m, 1h30m, 2d, 1.5s; a bare number is seconds.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace rlock {

using Millis = std::chrono::milliseconds;

// Longest duration anything accepts: 10 years. Larger values are typos, and keeping every sum of
// two durations far inside int64 milliseconds means no deadline arithmetic can overflow.
inline constexpr Millis k_max_duration{10LL * 366 * 24 * 3600 * 1000};

// The parsed value, or nullopt when TEXT is not a duration (or is above k_max_duration).
std::optional<Millis> parse_duration(std::string_view text);

// Whether TEXT is written as a duration but is above k_max_duration (3660d): what tells a
// value out of range from a typo, for the message.
bool duration_too_long(std::string_view text);

// Short human form: 450ms, 28.4s, 3m12s, 2h5m, 3d4h.
std::string format_duration(Millis d);

}  // namespace rlock
