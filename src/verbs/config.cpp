// rlock config: the effective configuration, value by value, with where each came from.
#include "output.h"
#include "verbs/verbs.h"

namespace rlock {

int config_verb(const RawSettings& settings, const std::optional<std::string>& config_file,
                bool json) {
  print_config(settings, config_file, output_style(json));
  return k_exit_ok;
}

}  // namespace rlock
