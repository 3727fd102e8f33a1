// Settings from every source, and how they combine: flag > environment > config file > default
// (docs/REDIS.md, rlock.toml(5)). Every setting is named by its long flag; the
// config file uses the same names. Pure: the environment comes in as a lookup function, files as
// text (config_file.h).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "settings/options.h"

namespace rlock {

struct Origin {
  enum class Kind { default_value, file, environment, flag };
  Kind kind = Kind::default_value;
  std::string where;  // "--ttl", "RLOCK_REDIS_URL", "/etc/rlock/config.toml:3:7", "default"
};

struct RawValue {
  std::vector<std::string> values;  // one, except for lists (redis)
  Origin origin;
};

// By long flag name ("ttl", "redis", ...).
using RawSettings = std::map<std::string, RawValue>;

enum class SettingKind {
  text,
  list,
  duration,
  wait,
  exit_code,
  count,
  size,
  signal,
  on_lost,
  flag,
  secret,
  command  // a shell line rlock runs as its user: shown by its program only
};

struct Resolved;
class SettingValue;

// One setting, said once: the command line's option (cli.cpp), the config file's key
// (config_file.cpp), `rlock config` (print.cpp, print_json.cpp) and the typed option
// (resolve_settings) are all made from this.
struct SettingInfo {
  const char* name;          // the long flag without "--", and the config file's key
  const char* flags;         // on the command line ("-w,--wait"); nullptr: environment or file
  SettingKind kind;          // how it is written: a file's TOML types follow it
  const char* default_text;  // nullptr: no default (unset, or computed from others)
  const char* type_name;     // the value in help: "D", "N", "URL" ...; nullptr for a flag
  const char* help;          // the option's help
  // Puts a value given for it into the typed options.
  void (*apply)(const SettingValue& value, Resolved& into);
};

// Every setting rlock knows, in display order (`rlock config`).
const std::vector<SettingInfo>& all_settings();
const SettingInfo* find_setting(std::string_view name);

RawSettings default_settings();
// RLOCK_REDIS_URL, RLOCK_PASSWORD, REDISCLI_AUTH.
RawSettings environment_settings(const std::function<const char*(const char*)>& getenv);
// TOP's values replace BASE's, key by key.
void overlay(RawSettings& base, const RawSettings& top);

// Typed settings. A bad value is Error(k_exit_usage) when it came from a flag, else
// Error(k_exit_config) naming where it came from (file:line:column, or the variable).
struct Resolved {
  GlobalOptions global;
  RunOptions run;  // key and command are the command line's, not settings
};
Resolved resolve_settings(const RawSettings& settings);

// Throws the error resolve_settings() would for VALUE of setting NAME when the value alone is
// wrong (not a duration, a number, a signal or a period: `run -w KEY -- CMD` took the key for
// --wait's value), and nothing for how it fits with other settings (--kill-after and the ttl).
void check_value(const std::string& name, const RawValue& value);

// The value as `rlock config` shows it: secrets as ***, passwords in URLs redacted, a command
// by its program alone ("vault ...": shell_command_summary()).
std::string display_value(const std::string& name, const RawValue& value);

}  // namespace rlock
