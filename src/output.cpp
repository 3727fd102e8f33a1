#include "output.h"

#include <chrono>

#include "lock_value.h"
#include "text.h"

namespace rlock {

std::string printable(std::string_view text, size_t max) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (i == max) {
      out += "...";
      break;
    }
    auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c >= 0x7f || c == '\\') {
      out += "\\x";
      append_hex(out, c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string describe_holder(std::string_view raw_value, Millis pttl) {
  std::string ttl = pttl.count() < 0 ? "no ttl" : "ttl " + format_duration(pttl);
  auto v = decode_lock_value(raw_value);
  if (!v) return "another client (value \"" + printable(raw_value) + "\"), " + ttl;
  auto now = std::chrono::time_point_cast<Millis>(std::chrono::system_clock::now());
  std::string out = printable(v->holder.host) + " pid " + std::to_string(v->holder.pid);
  if (!v->holder.cmd.empty()) out += " (" + printable(v->holder.cmd) + ")";
  out += " for " + format_duration(std::max(Millis(0), now - v->holder.since));
  return out + ", " + ttl;
}

}  // namespace rlock
