// libFuzzer target: decode_lock_value reads any bytes a Redis key may hold (another program's
// value, a truncated or hand-edited one) without crashing, and what it decodes re-encodes to a
// value that decodes to the same holder.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "lock_value.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto v = rlock::decode_lock_value(text);
  if (!v) return 0;
  if (!rlock::is_token(v->token)) std::abort();
  auto again = rlock::decode_lock_value(rlock::encode_lock_value(*v));
  if (!again || again->token != v->token || again->holder.host != v->holder.host ||
      again->holder.pid != v->holder.pid || again->holder.user != v->holder.user ||
      again->holder.cmd != v->holder.cmd || again->holder.since != v->holder.since)
    std::abort();
  return 0;
}
