// rlock config: the effective configuration, value by value, with where each came from.
#include <cstdio>

#include "settings.h"
#include "verbs.h"

namespace rlock {

namespace {

const char* origin_label(Origin::Kind kind) {
  switch (kind) {
  case Origin::Kind::default_value:
    return "default";
  case Origin::Kind::file:
    return "file";
  case Origin::Kind::environment:
    return "environment";
  case Origin::Kind::flag:
    return "flag";
  }
  return "";
}

}  // namespace

int config_verb(const RawSettings& settings, const std::optional<std::string>& config_file) {
  std::printf("%-20s %s\n", "config-file", config_file ? config_file->c_str() : "(none)");
  for (const SettingInfo& info : all_settings()) {
    auto it = settings.find(info.name);
    if (it == settings.end()) {
      std::printf("%-20s -\n", info.name);
      continue;
    }
    const RawValue& v = it->second;
    std::string where = v.origin.kind == Origin::Kind::default_value
                            ? "default"
                            : std::string(origin_label(v.origin.kind)) + " " + v.origin.where;
    std::string value = display_value(info.name, v);
    if (value.empty()) value = "\"\"";
    std::printf("%-20s %-40s %s\n", info.name, value.c_str(), where.c_str());
  }
  return std::ferror(stdout) ? k_exit_internal : k_exit_ok;
}

}  // namespace rlock
