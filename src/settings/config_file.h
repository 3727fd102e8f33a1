// The TOML config file: where it is looked for, and its keys as settings. The only file that
// includes toml++.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "settings/settings.h"

namespace rlock {

// The file to read: FLAG (--config), else $RLOCK_CONFIG, else the first that exists of
// $XDG_CONFIG_HOME/rlock/config.toml (~/.config when unset) and /etc/rlock/config.toml.
// nullopt when there is none. A file named by --config or $RLOCK_CONFIG must exist.
std::optional<std::string> find_config_file(const std::optional<std::string>& flag,
                                            const std::function<const char*(const char*)>& getenv);

// Settings from TEXT, the contents of the file PATH. Throws Error(k_exit_config) with
// PATH:LINE:COLUMN for a syntax error, an unknown key or a value of the wrong type.
RawSettings parse_config(std::string_view text, const std::string& path);

// Reads and parses PATH. Throws Error(k_exit_config) too when others can change the file and it
// sets a command rlock runs (password-command, notify); warns when it holds a password that
// others can read or change.
RawSettings read_config_file(const std::string& path);

}  // namespace rlock
