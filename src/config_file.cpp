#include "config_file.h"

#include <sys/stat.h>
#include <toml++/toml.h>

#include <fstream>
#include <sstream>

#include "error.h"

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
      kind == SettingKind::exit_code || kind == SettingKind::count || kind == SettingKind::signal) {
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
  default: return "a string";
  }
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

RawSettings parse_config(std::string_view text, const std::string& path) {
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
    if (!info) throw Error(k_exit_config, where + ": unknown key '" + name + "'");
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

RawSettings read_config_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw Error(k_exit_config, "config file " + path + " is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(k_exit_config, "cannot read config file " + errno_message(path));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(k_exit_config, "cannot read config file " + errno_message(path));
  return parse_config(text.str(), path);
}

}  // namespace rlock
