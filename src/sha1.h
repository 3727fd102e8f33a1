// SHA-1 of a short text, for naming Lua scripts (EVALSHA). Our own few lines instead of
// OpenSSL's: OpenSSL 3 loads its provider and configuration on first use, which cost about
// 1 ms on every rlock start (measured with callgrind: 5.3 M instructions of 11 M).
#pragma once

#include <string>
#include <string_view>

namespace rlock {

// Lowercase hex, 40 characters, as Redis names scripts.
std::string sha1_hex(std::string_view data);

}  // namespace rlock
