// Events on stderr, one line each, queued whole for the stderr writer (stderr_writer.h), so
// lines from the renewal thread and the main thread never interleave and never block either. For
// people (`rlock: KEY: message`) or, with
// --log-format json, for machines: one JSON object a line with time, level, event, key, message
// and the event's numbers.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "util/duration.h"

namespace rlock {

enum class Verbosity { quiet, normal, verbose };
enum class LogFormat { text, json };
// alert: a warning that -q does not silence, for a setup that quietly defeats the lock.
enum class Level { debug, info, warning, alert, error };

void set_verbosity(Verbosity v);
Verbosity verbosity();
void set_log_format(LogFormat f);

struct Event {
  const char* name;     // for machines: "acquired", "busy", "lost" ... (rlock-run(1), LOGS)
  std::string key;      // the lock, when the event is about one
  std::string message;  // for people, without the key
  std::vector<std::pair<const char*, int64_t>> numbers = {};  // fence, waited_ms ...
};

// debug: -v only (acquired at once, renewed, released). info and warning: silenced by -q.
// alert and error: always (lost lock, failures that decide the exit status).
void log(Level level, const Event& event);

// A message that is not one of the named events.
void log_debug(const std::string& message);
void log_warning(const std::string& message);
void log_error(const std::string& message);

// The warning that DROPPED lines were lost to a stderr that took nothing for STALLED
// (stderr_writer.h), in the log's format.
std::string dropped_lines_notice(uint64_t dropped, Millis stalled);

}  // namespace rlock
