// libFuzzer target: a config file is parsed and its settings resolved, or rejected with
// rlock::Error (78, or 64 for values); never a crash, a hang or another exception.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "settings/config_file.h"
#include "settings/settings.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    rlock::RawSettings settings = rlock::default_settings();
    rlock::overlay(settings, rlock::parse_config(text, "fuzz.toml"));
    (void)rlock::resolve_settings(settings);
  } catch (const rlock::Error& e) {
    if (e.exit_status() != rlock::k_exit_config && e.exit_status() != rlock::k_exit_usage)
      std::abort();
  }
  return 0;
}
