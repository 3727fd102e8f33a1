// How locks and holders read to a person. One place, so every verb and message says the same.
#pragma once

#include <string>
#include <string_view>

#include "duration.h"

namespace rlock {

// TEXT safe for a terminal: control and non-ASCII bytes as \xNN, cut after MAX bytes.
std::string printable(std::string_view text, size_t max = 80);

// "web-2 pid 4121 (report.sh) for 3m12s, ttl 28.4s", or for a value rlock did not write
// "another client (value "…"), ttl 28.4s". PTTL < 0: the key has no TTL.
std::string describe_holder(std::string_view raw_value, Millis pttl);

}  // namespace rlock
