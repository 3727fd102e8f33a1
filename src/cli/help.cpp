#include "cli/help.h"

#include <algorithm>

#include "cli/command_line.h"

namespace rlock {

namespace {

constexpr size_t k_width = 80;
constexpr size_t k_name_column = 26;  // where an option's description starts

// The name an option is shown by: "-w, --wait D", "KEY". Its other spellings are said in its
// description (aliases()).
std::string shown_name(const Option& option) {
  if (option.positional()) return option.names;
  std::string short_name, long_name;
  for (std::string_view n : names_of(option.flags())) {
    if (n.starts_with("--") && long_name.empty()) long_name = n;
    if (!n.starts_with("--") && short_name.empty()) short_name = n;
  }
  std::string out = short_name.empty() ? "    " + long_name : short_name + ", " + long_name;
  if (option.takes_value()) {
    const SettingInfo* setting = option.setting_info();
    const char* value = option.type_name ? option.type_name
                        : setting        ? setting->type_name
                                         : nullptr;
    out += std::string(" ") + (value ? value : "TEXT");
  }
  return out;
}

// ". Also -e, --timeout.": the spellings shown_name() leaves out.
std::string aliases(const Option& option) {
  if (option.positional()) return "";
  std::string shown = shown_name(option), out;
  for (std::string_view n : names_of(option.flags())) {
    std::string name(n);
    bool in_shown = shown.starts_with(name + ",") || shown.find(" " + name) != std::string::npos;
    if (!in_shown) out += (out.empty() ? "" : ", ") + name;
  }
  return out.empty() ? "" : ". Also " + out + ".";
}

std::string option_line(const Option& option) {
  const SettingInfo* setting = option.setting_info();
  std::string help = option.help ? option.help : setting ? setting->help : "";
  std::string name = "  " + shown_name(option);
  std::string out = name;
  size_t first = name.size();
  if (name.size() + 2 > k_name_column) {
    out += "\n";
    first = 0;
  }
  out += std::string(k_name_column - std::min(first, k_name_column), ' ');
  return out +
         wrap_text(help + aliases(option), k_width, k_name_column, std::max(first, k_name_column)) +
         "\n";
}

bool is_featured(const Command& command, const Option& option) {
  if (option.positional() || !option.flags()) return false;
  for (std::string_view n : names_of(option.flags()))
    if (std::find(command.featured.begin(), command.featured.end(), n) != command.featured.end())
      return true;
  return false;
}

std::string usage_lines(const Command& command, std::string_view name) {
  bool options = std::any_of(command.options.begin(), command.options.end(),
                             [](const OptionGroup& g) { return !g.options.empty(); });
  std::string out;
  std::string_view forms = command.usage;
  for (size_t start = 0; start <= forms.size();) {
    size_t end = std::min(forms.find('\n', start), forms.size());
    std::string_view form = forms.substr(start, end - start);
    out += (out.empty() ? "Usage: " : "   or: ") + std::string(name) +
           (options ? " [OPTIONS]" : "") + (form.empty() ? "" : " ") + std::string(form) + "\n";
    start = end + 1;
  }
  return out;
}

// FOOTER as paragraphs: its prose (lines joined), its examples as they are, its exit statuses.
std::string footer_text(std::string_view footer) {
  std::string out, prose;
  auto flush = [&] {
    if (!prose.empty()) out += "\n" + wrap_text(prose, k_width, 0, 0) + "\n";
    prose.clear();
  };
  for (size_t start = 0; start < footer.size();) {
    size_t end = std::min(footer.find('\n', start), footer.size());
    std::string_view line = footer.substr(start, end - start);
    start = end + 1;
    if (line.starts_with("Examples:") || line.starts_with("Exit status:")) flush();
    if (line.starts_with("Examples:")) out += "\n";
    if (line.starts_with("Examples:") || line.starts_with(' ')) {
      out += std::string(line) + "\n";
      continue;
    }
    prose += (prose.empty() ? "" : " ") + std::string(line);
  }
  flush();
  return out;
}

}  // namespace

std::string wrap_text(std::string_view text, size_t width, size_t indent, size_t first) {
  std::string out;
  size_t column = first;
  for (size_t start = 0; start <= text.size();) {
    size_t end = std::min(text.find('\n', start), text.size());
    std::string_view line = text.substr(start, end - start);
    if (start > 0) {
      out += "\n" + std::string(indent, ' ');
      column = indent;
    }
    start = end + 1;
    if (line.starts_with(' ')) {  // an example: as it is
      out += line;
      continue;
    }
    bool at_start = true;
    for (size_t w = 0; w < line.size();) {
      size_t space = std::min(line.find(' ', w), line.size());
      std::string_view word = line.substr(w, space - w);
      w = space + 1;
      if (word.empty()) continue;
      if (!at_start && column + 1 + word.size() > width) {
        out += "\n" + std::string(indent, ' ');
        column = indent;
        at_start = true;
      }
      if (!at_start) {
        out += ' ';
        ++column;
      }
      out += word;
      column += word.size();
      at_start = false;
    }
  }
  return out;
}

std::string command_help(const Command& command) {
  std::string name = "rlock " + std::string(command.name);
  std::string out = name + ": " + command.summary + "\n\n" + usage_lines(command, name);
  auto section = [&](const char* heading, auto&& wanted) {
    std::string lines;
    for (const OptionGroup& group : command.options)
      for (const Option& option : group)
        if (!option.hidden && wanted(group, option)) lines += option_line(option);
    if (!lines.empty()) out += std::string("\n") + heading + ":\n" + lines;
  };
  // Arguments, the featured options, then each group under its heading.
  auto is_arguments = [](const OptionGroup& g) {
    return g.heading && std::string_view(g.heading) == "Arguments";
  };
  section("Arguments", [&](const OptionGroup& g, const Option& o) {
    return is_arguments(g) || (o.positional() && !g.heading);
  });
  if (!command.featured.empty())
    section("Most used",
            [&](const OptionGroup&, const Option& o) { return is_featured(command, o); });
  std::vector<const char*> headings;
  for (const OptionGroup& group : command.options) {
    if (group.options.empty() || is_arguments(group)) continue;
    const char* heading = group.heading ? group.heading : "Options";
    if (std::find_if(headings.begin(), headings.end(), [&](const char* h) {
          return std::string_view(h) == heading;
        }) == headings.end())
      headings.push_back(heading);
  }
  for (const char* heading : headings) {
    if (heading == k_connection.heading) {  // one paragraph: rlock help connection has more
      std::string names;                    // "--key\x1f" "FILE": kept on one line
      for (const Option& option : k_connection) {
        std::string name = shown_name(option);
        name.erase(0, name.find_first_not_of(' '));
        std::replace(name.begin(), name.end(), ' ', '\x1f');
        names += (names.empty() ? "" : ", ") + name;
      }
      std::string text = wrap_text(names, k_width, 2, 2);
      std::replace(text.begin(), text.end(), '\x1f', ' ');
      out += std::string("\n") + heading + " (rlock help connection):\n  " + text + "\n";
      continue;
    }
    section(heading, [&](const OptionGroup& g, const Option& o) {
      if (std::string_view(g.heading ? g.heading : "Options") != heading) return false;
      if (!g.heading && o.positional()) return false;
      return !is_featured(command, o);
    });
  }
  if (command.footer) out += footer_text(command.footer);
  return out;
}

std::string connection_help() {
  std::string out =
      "rlock help connection: where Redis is and how to reach it\n\n"
      "These options are every command's that talks to Redis, and may come before the\n"
      "command (rlock -u URL status KEY). Each is also a key of the config file, where\n"
      "the password goes too (password = ...); RLOCK_REDIS_URL, RLOCK_PASSWORD and\n"
      "REDISCLI_AUTH come between the file and the flags. rlock config shows what is\n"
      "used, and where each value came from.\n\n"
      "Connection:\n";
  for (const Option& option : k_connection) out += option_line(option);
  return out;
}

std::string overview_help() {
  std::string out =
      "rlock: run a command on at most one host of a fleet at a time, holding a Redis lock\n"
      "while it runs.\n\n"
      "Usage: rlock [CONNECTION OPTIONS] COMMAND [OPTIONS] [ARGS...]\n";
  for (const CommandSection& section : command_sections()) {
    out += std::string("\n") + section.heading + ":\n";
    for (const Command* c : section.commands) {
      std::string line = "  " + std::string(c->name);
      line += std::string(line.size() < 16 ? 16 - line.size() : 1, ' ');
      out += line + wrap_text(c->summary, k_width, 16, 16) + "\n";
    }
  }
  out += "\n" +
         wrap_text("Connection options (-u URL, --config FILE, --password-file FILE ...) may "
                   "come before the command, as in:\n"
                   "  rlock -u redis://redis.internal:6379 status lock:daily-report\n"
                   "rlock COMMAND --help (or rlock help COMMAND) shows a command's options, "
                   "examples and exit statuses; rlock --version the version. See rlock(1).",
                   k_width, 0, 0) +
         "\n";
  return out;
}

}  // namespace rlock
