// Sizes as users write them: 4096, 64k, 1M, 16MiB (k and M are 1024 and 1024², as in head -c
// and ulimit); and as rlock says them: 512 B, 64 KiB, 1.5 MiB.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rlock {

// The size in bytes, or nullopt when TEXT is not one: digits, then nothing, or k, K, m, M, g
// or G, optionally followed by "iB" or "B". Sizes past 1 TiB are refused as typos.
std::optional<uint64_t> parse_byte_size(std::string_view text);

// "512 B", "64 KiB", "1.5 MiB", "16 MiB": one decimal from KiB up, none for a whole number.
std::string format_byte_size(uint64_t bytes);

}  // namespace rlock
