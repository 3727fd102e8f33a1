#include "util/log.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>

#include "util/stderr_writer.h"
#include "util/text.h"
#include "util/wall_time.h"

namespace rlock {

namespace {

std::atomic<Verbosity> g_verbosity{Verbosity::normal};
std::atomic<LogFormat> g_format{LogFormat::text};

const char* level_name(Level level) {
  switch (level) {
  case Level::debug: return "debug";
  case Level::info: return "info";
  case Level::warning:
  case Level::alert: return "warning";
  case Level::error: return "error";
  }
  return "";
}

bool shown(Level level) {
  switch (level) {
  case Level::debug: return g_verbosity == Verbosity::verbose;
  case Level::info:
  case Level::warning: return g_verbosity != Verbosity::quiet;
  case Level::alert:
  case Level::error: return true;
  }
  return true;
}

std::string text_line(Level level, const Event& e) {
  std::string line = "rlock: ";
  if (level >= Level::warning) line += std::string(level_name(level)) + ": ";
  // A message holds pieces escaped by printable() already: its backslashes are theirs.
  if (!e.key.empty())
    line += terminal_safe(e.key, std::string_view::npos, Backslashes::kept) + ": ";
  return line + terminal_safe(e.message, std::string_view::npos, Backslashes::kept) + "\n";
}

std::string json_line(Level level, const Event& e) {
  auto now =
      std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now());
  std::string line = "{\"time\":\"" + format_rfc3339(now) + "\",\"level\":\"" + level_name(level) +
                     "\",\"event\":\"" + e.name + "\"";
  if (!e.key.empty()) line += ",\"key\":" + json_string(e.key);
  line += ",\"message\":" + json_string(e.message);
  for (const auto& [name, value] : e.numbers)
    line += ",\"" + std::string(name) + "\":" + std::to_string(value);
  return line + "}\n";
}

}  // namespace

Verbosity verbosity() { return g_verbosity.load(); }
void set_verbosity(Verbosity v) { g_verbosity = v; }
void set_log_format(LogFormat f) { g_format = f; }

void log(Level level, const Event& event) {
  if (!shown(level)) return;
  write_stderr(g_format == LogFormat::json ? json_line(level, event) : text_line(level, event));
}

std::string dropped_lines_notice(uint64_t dropped, Millis stalled) {
  Event e{"log_dropped",
          "",
          std::to_string(dropped) + (dropped == 1 ? " line" : " lines") +
              " of rlock's were dropped: stderr took nothing for " + format_duration(stalled),
          {{"dropped", static_cast<int64_t>(dropped)}}};
  return g_format == LogFormat::json ? json_line(Level::warning, e) : text_line(Level::warning, e);
}

void log_debug(const std::string& message) { log(Level::debug, {"message", "", message}); }
void log_warning(const std::string& message) { log(Level::warning, {"message", "", message}); }
void log_error(const std::string& message) { log(Level::error, {"message", "", message}); }

}  // namespace rlock
