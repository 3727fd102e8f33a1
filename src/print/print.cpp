// What every command's output shares: the style, stdout, the escaping of text; acquire's and
// config's output. The other commands' are in print_locks.cpp (status, list),
// print_inspect.cpp, print_history.cpp (history, check) and print_watch.cpp; every JSON
// document in print_json.cpp.
#include "print/print.h"

#include <unistd.h>

#include <cstdlib>

#include "print/print_json.h"
#include "print/print_text.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/sha1.h"
#include "util/text.h"

namespace rlock {

OutputStyle output_style(bool json) {
  OutputStyle style;
  style.json = json;
  const char* no_color = std::getenv("NO_COLOR");
  style.color = !json && ::isatty(STDOUT_FILENO) && !(no_color && *no_color);
  return style;
}

void write_stdout(const std::string& text) {
  if (write_all(STDOUT_FILENO, text.data(), text.size())) return;
  if (errno == EPIPE) throw StdoutClosed(k_exit_internal, errno_message("write to stdout"));
  throw Error(k_exit_internal, errno_message("write to stdout"));
}

std::string printable(std::string_view text, size_t max) { return terminal_safe(text, max); }

std::string printable_key(std::string_view key) {
  constexpr size_t k_key_chars = 80;
  std::string cut = terminal_safe(key, k_key_chars);
  if (cut == terminal_safe(key)) return cut;
  Sha1Hex hash = sha1_hex(key);
  return cut + "#" + std::string(hash.data(), 8);
}

const char* origin_name(Origin::Kind kind) {
  switch (kind) {
  case Origin::Kind::default_value: return "default";
  case Origin::Kind::file: return "file";
  case Origin::Kind::environment: return "environment";
  case Origin::Kind::flag: return "flag";
  }
  return "";
}

void print_acquired(const std::string& key, const std::string& token, int64_t fence, Millis ttl,
                    const OutputStyle& style) {
  write_stdout(style.json ? acquired_json(key, token, fence, ttl) : token + "\n");
}

void print_config(const RawSettings& settings, const std::optional<std::string>& config_file,
                  const OutputStyle& style) {
  if (style.json) {
    write_stdout(config_json(settings, config_file));
    return;
  }
  auto row = [](const std::string& name, const std::string& value, const std::string& where) {
    std::string line = name + std::string(name.size() < 21 ? 21 - name.size() : 1, ' ') + value;
    if (!where.empty()) line += std::string(value.size() < 41 ? 41 - value.size() : 1, ' ') + where;
    return line + "\n";
  };
  std::string out = row("config-file", config_file ? *config_file : "(none)", "");
  for (const SettingInfo& info : all_settings()) {
    auto it = settings.find(info.name);
    if (it == settings.end()) {
      out += row(info.name, "-", "");
      continue;
    }
    const RawValue& v = it->second;
    std::string value = display_value(info.name, v);
    if (value.empty()) value = "\"\"";
    std::string where = v.origin.kind == Origin::Kind::default_value
                            ? v.origin.where  // "default", or the rule a derived default follows
                            : std::string(origin_name(v.origin.kind)) + " " + v.origin.where;
    out += row(info.name, value, where);
  }
  write_stdout(out);
}

}  // namespace rlock
