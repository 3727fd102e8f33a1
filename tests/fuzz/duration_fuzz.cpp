// libFuzzer target: parse_duration never crashes, stays within the documented bounds, and
// what format_duration prints of it (rounded down for display) parses back to within one unit
// of the printed precision.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "util/duration.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto d = rlock::parse_duration(text);
  if (!d) return 0;
  if (*d < rlock::Millis(0) || *d > rlock::k_max_duration) std::abort();
  auto again = rlock::parse_duration(rlock::format_duration(*d));
  if (!again || *again > *d) std::abort();
  using namespace std::chrono_literals;
  auto unit = *d < 1s     ? 1ms
              : *d < 1min ? 100ms
              : *d < 1h   ? rlock::Millis(1s)
              : *d < 24h  ? rlock::Millis(1min)
                          : rlock::Millis(1h);
  if (*d - *again >= unit) std::abort();
  return 0;
}
