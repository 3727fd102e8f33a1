// SHA-1 of a short text: the keeper of `acquire --while-pid` listens on a socket named after
// its token's hash (keeper_link.cpp), and a unit test checks the Lua scripts' names (which the
// build computes, scripts.h) with it. Our own few lines instead of OpenSSL's: libssl is loaded
// only for rediss:// (tls.h), and OpenSSL 3 loads its provider and configuration on first use.
#pragma once

#include <array>
#include <string_view>

namespace rlock {

// Lowercase hex, 40 characters, as Redis names scripts.
using Sha1Hex = std::array<char, 40>;

Sha1Hex sha1_hex(std::string_view data);

}  // namespace rlock
