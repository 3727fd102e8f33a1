#include "util/byte_size.h"

#include <cstdio>

namespace rlock {

std::optional<uint64_t> parse_byte_size(std::string_view text) {
  constexpr uint64_t k_most = uint64_t(1) << 40;
  size_t i = 0;
  uint64_t n = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    n = n * 10 + static_cast<uint64_t>(text[i] - '0');
    if (n > k_most) return std::nullopt;
  }
  if (i == 0) return std::nullopt;
  std::string_view unit = text.substr(i);
  uint64_t scale = 1;
  if (!unit.empty()) {
    switch (unit.front()) {
    case 'k':
    case 'K': scale = uint64_t(1) << 10; break;
    case 'm':
    case 'M': scale = uint64_t(1) << 20; break;
    case 'g':
    case 'G': scale = uint64_t(1) << 30; break;
    default: return std::nullopt;
    }
    unit.remove_prefix(1);
    if (!unit.empty() && unit != "B" && unit != "iB") return std::nullopt;
  }
  if (n > k_most / scale) return std::nullopt;
  return n * scale;
}

std::string format_byte_size(uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes) / 1024;
  size_t u = 0;
  while (v >= 1024 && u + 1 < std::size(units)) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  uint64_t unit = uint64_t(1) << (10 * (u + 1));
  if (bytes % unit == 0)
    std::snprintf(buf, sizeof buf, "%llu %s", static_cast<unsigned long long>(bytes / unit),
                  units[u]);
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

}  // namespace rlock
