#include "settings/config_file.h"

#include <sys/stat.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include "util/error.h"
#include "util/log.h"
#include "util/text.h"
#include "util/trusted_file.h"

namespace rlock {

namespace {

std::string location(const std::string& path, const toml::source_region& where) {
  return path + ":" + std::to_string(where.begin.line) + ":" + std::to_string(where.begin.column);
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// One value as text, or nullopt when NODE is not a scalar this setting can take.
std::optional<std::string> scalar_text(const toml::node& node, SettingKind kind) {
  if (auto s = node.value_exact<std::string>()) return *s;
  if (kind == SettingKind::flag) {
    if (auto b = node.value_exact<bool>()) return *b ? "true" : "false";
    return std::nullopt;
  }
  if (kind == SettingKind::duration || kind == SettingKind::wait ||
      kind == SettingKind::exit_code || kind == SettingKind::count || kind == SettingKind::signal ||
      kind == SettingKind::size) {
    if (auto i = node.value_exact<int64_t>()) return std::to_string(*i);
  }
  if (kind == SettingKind::duration || kind == SettingKind::wait) {
    if (auto f = node.value_exact<double>()) {
      std::ostringstream out;
      out << *f;
      return out.str();
    }
  }
  return std::nullopt;
}

const char* expected(SettingKind kind) {
  switch (kind) {
  case SettingKind::list: return "a string or an array of strings";
  case SettingKind::flag: return "true or false";
  case SettingKind::duration:
  case SettingKind::wait: return "a duration such as \"30s\"";
  case SettingKind::exit_code:
  case SettingKind::count: return "an integer";
  case SettingKind::size: return "a size such as \"1M\"";
  default: return "a string";
  }
}

// toml++ 3.3 reaches __builtin_unreachable (undefined behaviour) when it asks whether a
// character from U+00A1 to U+0499 is whitespace, which it does wherever TOML allows only ASCII:
// between tokens, inside a malformed token, after a backslash (found by
// tests/fuzz/config_fuzz.cpp). So toml++ gets a line with non-ASCII in it only when that line
// is plainly a comment or `key = "string"` / `key = ["string", ...]` with the non-ASCII inside
// the strings or the comment. Anything else with non-ASCII is refused first, in the same
// file:line:column form (it is invalid TOML, or a multi-line string, which no setting needs).
class LineCheck {
public:
  explicit LineCheck(std::string_view line) : s_(line) {}

  // The first non-ASCII byte of the line, if toml++ must not see the line.
  std::optional<size_t> problem() {
    if (std::all_of(s_.begin(), s_.end(), [](char c) { return (c & 0x80) == 0; }))
      return std::nullopt;
    blanks();
    if (at('#') || (key() && (blanks(), eat('=')) && (blanks(), value()) && (blanks(), end())))
      return std::nullopt;
    return first_non_ascii();
  }

private:
  bool at(char c) const { return i_ < s_.size() && s_[i_] == c; }
  bool eat(char c) { return at(c) ? (++i_, true) : false; }
  void blanks() {
    while (at(' ') || at('\t')) ++i_;
  }
  bool end() const { return at('#') || i_ == s_.size() || (at('\r') && i_ + 1 == s_.size()); }
  bool key() {
    size_t from = i_;
    while (i_ < s_.size() &&
           (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '-' || s_[i_] == '_'))
      ++i_;
    return i_ > from;
  }
  bool value() {
    if (!eat('[')) return string();
    for (;;) {
      blanks();
      if (eat(']')) return true;
      if (!string()) return false;
      blanks();
      if (eat(']')) return true;
      if (!eat(',')) return false;
    }
  }
  bool string() {
    std::string_view rest = s_.substr(i_);
    if (rest.starts_with(R"(""")") || rest.starts_with("'''")) return false;
    char quote = at('"') ? '"' : at('\'') ? '\'' : 0;
    if (!quote) return false;
    for (++i_; i_ < s_.size(); ++i_) {
      if (s_[i_] == quote) {
        ++i_;
        return true;
      }
      if (quote == '"' && s_[i_] == '\\') {
        if (i_ + 1 >= s_.size() || (s_[i_ + 1] & 0x80)) return false;  // ASCII escapes only
        ++i_;
      }
    }
    return false;
  }
  size_t first_non_ascii() const {
    size_t k = 0;
    while (k < s_.size() && (s_[k] & 0x80) == 0) ++k;
    return k;
  }

  std::string_view s_;
  size_t i_ = 0;
};

// The offset of the first byte toml++ must not see, or nullopt.
std::optional<size_t> non_ascii_outside_strings(std::string_view text) {
  for (size_t start = 0; start <= text.size();) {
    size_t newline = text.find('\n', start);
    size_t stop = newline == std::string_view::npos ? text.size() : newline;
    if (auto at = LineCheck(text.substr(start, stop - start)).problem()) return start + *at;
    start = stop + 1;
  }
  return std::nullopt;
}

std::string line_and_column(std::string_view text, size_t offset) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else if ((static_cast<unsigned char>(text[i]) & 0xc0) != 0x80) {
      ++column;  // columns count characters, as toml++'s do
    }
  }
  return std::to_string(line) + ":" + std::to_string(column);
}

}  // namespace

std::optional<std::string> find_config_file(const std::optional<std::string>& flag,
                                            const std::function<const char*(const char*)>& getenv) {
  auto must_exist = [](const std::string& path, const std::string& named_by) {
    if (path.empty()) throw usage_error(named_by + ": empty path");
    if (!file_exists(path))
      throw Error(k_exit_config, "config file " + path + " (from " + named_by + ") does not exist");
    return path;
  };
  if (flag) return must_exist(*flag, "--config");
  if (const char* env = getenv("RLOCK_CONFIG"); env && *env) return must_exist(env, "RLOCK_CONFIG");
  std::string user_dir;
  if (const char* xdg = getenv("XDG_CONFIG_HOME"); xdg && *xdg)
    user_dir = xdg;
  else if (const char* home = getenv("HOME"); home && *home)
    user_dir = std::string(home) + "/.config";
  if (!user_dir.empty() && file_exists(user_dir + "/rlock/config.toml"))
    return user_dir + "/rlock/config.toml";
  if (file_exists("/etc/rlock/config.toml")) return "/etc/rlock/config.toml";
  return std::nullopt;
}

namespace {

// "unknown key 'redis-url': did you mean 'redis'? (keys: ...)".
std::string unknown_key(const std::string& name) {
  std::vector<std::string> keys;
  std::string list;
  for (const SettingInfo& s : all_settings()) {
    keys.emplace_back(s.name);
    list += (list.empty() ? "" : ", ") + std::string(s.name);
  }
  if (name == "command")  // -c is the job itself, not a setting
    return "command: the job is given on the command line (rlock run KEY -- COMMAND, or -c "
           "'TEXT'), not in a config file";
  std::string out = "unknown key '" + terminal_safe(name) + "'";
  if (auto guess = closest_word(name, keys)) out += ": did you mean '" + *guess + "'?";
  return out + " (keys: " + list + ")";
}

}  // namespace

RawSettings parse_config(std::string_view text, const std::string& path) {
  if (auto at = non_ascii_outside_strings(text))
    throw Error(k_exit_config,
                path + ":" + line_and_column(text, *at) +
                    ": a character other than ASCII outside a one-line string or a comment");
  toml::table table;
  try {
    table = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    throw Error(k_exit_config, location(path, e.source()) + ": " + std::string(e.description()));
  }
  RawSettings out;
  for (const auto& [key, node] : table) {
    std::string name(key.str());
    std::string where = location(path, key.source());
    const SettingInfo* info = find_setting(name);
    if (!info) throw Error(k_exit_config, where + ": " + unknown_key(name));
    RawValue value{{}, {Origin::Kind::file, where}};
    if (const toml::array* list = node.as_array(); list && info->kind == SettingKind::list) {
      for (const toml::node& item : *list) {
        auto s = item.value_exact<std::string>();
        if (!s)
          throw Error(k_exit_config, location(path, item.source()) + ": " + name + ": expected " +
                                         expected(info->kind));
        value.values.push_back(*s);
      }
    } else if (auto s = scalar_text(node, info->kind)) {
      value.values.push_back(*s);
    } else {
      throw Error(k_exit_config, location(path, node.source()) + ": " + name + ": expected " +
                                     expected(info->kind));
    }
    out[name] = std::move(value);
  }
  return out;
}

namespace {

// The first of SETTINGS of KIND, by name; nullptr when there is none.
const char* first_of_kind(const RawSettings& settings, SettingKind kind) {
  for (const auto& [name, value] : settings)
    if (const SettingInfo* info = find_setting(name); info && info->kind == kind) return info->name;
  return nullptr;
}

// A config file is trusted with what it sets: the commands rlock runs as its user
// (password-command, notify), the files it writes (metrics-file, heartbeat-file), the Redis it
// sends its password to. One that others can change is refused whatever it sets, as ssh
// refuses such a config; one that holds a password and that others can read earns a
// warning, as a password file does (rlock.toml(5)).
void check_access(const std::string& path, const struct stat& st, const RawSettings& settings) {
  FileAccess access = file_access(path, st);
  if (!access.changed_by_others.empty()) {
    const char* command = first_of_kind(settings, SettingKind::command);
    throw Error(k_exit_config,
                "config file " + path + " can be changed by others (" + access.changed_by_others +
                    (command ? ") and sets " + std::string(command) +
                                   ", a command rlock runs as its user; refused"
                             : "): it says what rlock runs, writes and connects to; refused"));
  }
  if (first_of_kind(settings, SettingKind::secret) && !access.read_by_others.empty())
    log_warning("config file " + path + " holds a password and can be read by others (" +
                access.read_by_others + "); chmod 600 it");
}

}  // namespace

RawSettings read_config_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw Error(k_exit_config, "config file " + path + " is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(k_exit_config, "cannot read config file " + errno_message(path));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(k_exit_config, "cannot read config file " + errno_message(path));
  RawSettings settings = parse_config(text.str(), path);
  check_access(path, st, settings);
  return settings;
}

}  // namespace rlock
