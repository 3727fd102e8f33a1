// libFuzzer target: decode_lock_value reads any bytes a Redis key may hold (another program's
// value, a truncated or hand-edited one, a tombstone) without crashing; a holder it decodes has
// a token, or is a tombstone of another program's lock ("-"), and re-encodes to a value that
// decodes to the same holder.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "lock/lock_value.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto v = rlock::decode_lock_value(text);
  if (!v) return 0;
  if (v->token.empty()) {
    if (!v->broken) std::abort();
    return 0;  // the tombstone of another program's lock: no holder of ours to re-encode
  }
  if (!rlock::is_token(v->token)) std::abort();
  v->broken.reset();  // encode_lock_value writes a live holder; the tombstone is made in Lua
  auto again = rlock::decode_lock_value(rlock::encode_lock_value(*v));
  if (!again || again->token != v->token || again->holder.host != v->holder.host ||
      again->holder.pid != v->holder.pid || again->holder.user != v->holder.user ||
      again->holder.cmd != v->holder.cmd || again->holder.since != v->holder.since ||
      again->ttl_ms != v->ttl_ms || again->holder.group != v->holder.group ||
      again->holder.pidns != v->holder.pidns)
    std::abort();
  return 0;
}
