// The verbs: one function each, taking parsed options and returning the exit status.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "options.h"
#include "settings.h"

namespace rlock {

class Redis;

// The Redis that GlobalOptions point at, with its password read (from a password file too).
std::unique_ptr<Redis> connect_redis(const GlobalOptions& global);

int run_verb(const GlobalOptions& global, const RunOptions& options);

// Prints every setting, its value (secrets redacted) and where it came from.
int config_verb(const RawSettings& settings, const std::optional<std::string>& config_file);

}  // namespace rlock
