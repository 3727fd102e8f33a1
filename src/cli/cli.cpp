#include "cli/cli.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <hiredis/hiredis.h>
#include <span>
#include <sstream>
#include <string_view>

#include "cli/command_line.h"
#include "cli/help.h"
#include "lock/lock.h"
#include "print/print.h"
#include "redis/tls.h"
#include "settings/config_file.h"
#include "settings/settings.h"
#include "util/error.h"
#include "util/text.h"
#include "verbs/command.h"
#include "cli/version.h"  // made by the build (packaging/version.cmake), not in src/

namespace rlock {

namespace {

std::string version_text() {
  std::string tls = tls_library_version().value_or("not found");
  return std::string("rlock ") + RLOCK_VERSION + " (hiredis " + std::to_string(HIREDIS_MAJOR) +
         "." + std::to_string(HIREDIS_MINOR) + "." + std::to_string(HIREDIS_PATCH) +
         "; TLS: " + tls + ", loaded for rediss:// only)";
}

const char* env(const char* name) { return std::getenv(name); }

// What the command line says beyond the command's own Arguments: settings given as flags (by
// long name), and the options cli.cpp acts on itself (command.h's Into::config_file ...).
struct CommandLine {
  RawSettings flags;
  std::optional<std::string> config_path;
  bool no_wait = false;
  bool exclusive = false;  // flock's -x: the default
  std::string flock_only;  // a flock option with no meaning here (refused after the parse)

  // The words before "--". Only the options they name are built (and so known to the parser):
  // building an option costs CLI11 about 2 µs, and `rlock run` has 36. A word that is not an
  // option is not one either way, so the parse comes out the same; the help text and the
  // message for a command line CLI11 refuses are made with every option built.
  std::vector<std::string> words;
  bool every_option = true;

  // Whether an option called NAMES ("-w,--wait") may be in the words: a long name as a word or
  // before '=', a short one's letter in a word of short flags (-qv, -w5). Erring towards yes
  // only builds an option too many.
  bool named(std::string_view names) const {
    if (every_option) return true;
    for (size_t start = 0; start < names.size();) {
      size_t comma = std::min(names.find(',', start), names.size());
      std::string_view name = names.substr(start, comma - start);
      start = comma + 1;
      for (std::string_view word : words) {
        if (name.starts_with("--")
                ? word == name || (word.starts_with(name) && word.size() > name.size() &&
                                   word[name.size()] == '=')
                : word.size() > 1 && word[0] == '-' && word[1] != '-' &&
                      word.find(name.back(), 1) != std::string_view::npos)
          return true;
      }
    }
    return false;
  }
};

// A flag that is also a setting (and so a config-file key): its value lands in line.flags.
void add_setting(CLI::App* app, CommandLine& line, const SettingInfo& setting, const char* help) {
  if (!line.named(setting.flags)) return;
  std::string name = setting.name;
  std::string text = help ? help : setting.help;
  if (setting.kind == SettingKind::flag) {
    // CLI11 sums the flag's occurrences: 1 each, -1 for --NAME=false (or 0, no, off).
    app->add_flag_function(
        setting.flags,
        [&line, name](int64_t count) {
          line.flags[name] =
              RawValue{{count > 0 ? "true" : "false"}, {Origin::Kind::flag, "--" + name}};
        },
        text);
    return;
  }
  CLI::Option* opt;
  if (setting.kind == SettingKind::list) {
    // Repeatable (Redlock): --redis A --redis B; each takes one value.
    opt = app->add_option_function<std::vector<std::string>>(
        setting.flags,
        [&line, name](const std::vector<std::string>& values) {
          line.flags[name] = RawValue{values, {Origin::Kind::flag, "--" + name}};
        },
        text);
    opt->allow_extra_args(false);
  } else {
    opt = app->add_option_function<std::string>(
        setting.flags,
        [&line, name](const std::string& value) {
          line.flags[name] = RawValue{{value}, {Origin::Kind::flag, "--" + name}};
        },
        text);
  }
  opt->type_name(setting.type_name);
}

// Why a flock(1) option NAMES ("-F,--no-fork") means nothing here, and what rlock offers.
std::string flock_only_message(std::string_view names) {
  std::string flag(names.substr(names.rfind(',') + 1));
  if (names.find("no-fork") != std::string_view::npos)
    return flag + " is flock's: rlock always forks (a process must renew the lock while the "
                  "command runs); to hold a lock in the shell itself, use "
                  "rlock acquire --while-pid $$ KEY";
  if (names.find("close") != std::string_view::npos)
    return flag + " is flock's: the command never inherits a descriptor of rlock's, so there is "
                  "nothing to close; what it leaves running holds the lock (--leftovers kill "
                  "stops it instead)";
  if (names.find("unlock") != std::string_view::npos)
    return flag + " is flock's: give a lock back with rlock release KEY --token T (the token "
                  "rlock acquire printed)";
  return flag + " is flock's: rlock locks a Redis key, not a file, so there is no kind of file "
                "lock to choose";
}

std::string command_list() {
  std::string out;
  for (const Command* c : all_commands()) out += (out.empty() ? "" : ", ") + std::string(c->name);
  return out;
}

// "unknown command 'stauts': did you mean status?", or the list of commands.
std::string unknown_command(const std::string& word) {
  std::vector<std::string> names;
  for (const Command* c : all_commands()) names.emplace_back(c->name);
  std::string out = "unknown command '" + terminal_safe(word) + "'";
  if (auto guess = closest_word(word, names)) return out + ": did you mean " + *guess + "?";
  return out + " (commands: " + command_list() + ")";
}

// "unknown option '--wiat': did you mean --wait?": among COMMAND's long names.
std::string unknown_option(const Command& command, const std::string& word) {
  std::string name = word.substr(0, word.find('='));
  std::string out = "unknown option '" + terminal_safe(name) + "'";
  if (!name.starts_with("--")) return out;
  std::vector<std::string> names;
  for_each_option(command, [&](const Option& option) {
    if (option.positional() || option.hidden || !option.flags()) return;
    for (std::string_view n : names_of(option.flags()))
      if (n.starts_with("--")) names.emplace_back(n);
  });
  if (auto guess = closest_word(name, names)) return out + ": did you mean " + *guess + "?";
  return out;
}

// A number's range, for the help ("INT in [1 - 100000]", as CLI11's own Range says it) and the
// parse: "'k' is not a whole number from 1 to 100000" (a word it took for its value, history
// -n KEY, is named as typed).
CLI::Option* with_range(CLI::Option* opt, const Option& option) {
  if (option.max <= option.min) return opt;
  int lowest = option.min, highest = option.max;
  std::string range = std::to_string(lowest) + " to " + std::to_string(highest);
  return opt->check(CLI::Validator(
      [lowest, highest, range](std::string& value) -> std::string {
        int n = 0;  // read as CLI11 reads the number after this check
        if (CLI::detail::lexical_cast(value, n) && n >= lowest && n <= highest) return "";
        return "'" + terminal_safe(value) + "' is not a whole number from " + range;
      },
      "INT in [" + std::to_string(lowest) + " - " + std::to_string(highest) + "]"));
}

// Adds OPTION, whose value goes to ARGS (the command's) or LINE, to APP.
void add_option(CLI::App* app, CommandLine& line, Arguments& args, const Option& option) {
  if (option.into == Into::setting) {
    const SettingInfo* setting = option.setting_info();
    // A test runs every command's declarations through this (test_cli's hidden listing).
    if (!setting) throw Error(k_exit_internal, std::string("no setting '") + option.setting + "'");
    add_setting(app, line, *setting, option.help);
    return;
  }
  // An argument, and an option without which the parse fails, are always built.
  if (!option.positional() && !option.required && !line.named(option.names)) return;
  const char* names = option.names;
  std::string help = option.help;
  void* field = option.field ? option.field(args) : nullptr;
  CLI::Option* opt = nullptr;
  switch (option.into) {
  case Into::setting: return;
  case Into::flag: opt = app->add_flag(names, *static_cast<bool*>(field), help); break;
  case Into::text: opt = app->add_option(names, *static_cast<std::string*>(field), help); break;
  case Into::optional_text:
    opt = app->add_option(names, *static_cast<std::optional<std::string>*>(field), help);
    break;
  case Into::texts:
    opt = app->add_option(names, *static_cast<std::vector<std::string>*>(field), help);
    break;
  case Into::number:
    opt = with_range(app->add_option(names, *static_cast<int*>(field), help), option);
    break;
  case Into::optional_number:
    opt =
        with_range(app->add_option(names, *static_cast<std::optional<int>*>(field), help), option);
    break;
  case Into::config_file: opt = app->add_option(names, line.config_path, help); break;
  case Into::no_wait: opt = app->add_flag(names, line.no_wait, help); break;
  case Into::exclusive: opt = app->add_flag(names, line.exclusive, help); break;
  case Into::flock_only:
    opt = app->add_flag_callback(
        names, [&line, names] { line.flock_only = names; }, help);
    break;
  }
  if (option.type_name) opt->type_name(option.type_name);
  if (option.required) opt->required();
  if (option.hidden) opt->group("");
}

// Adds COMMAND's options to APP, in its order.
void add_options(CLI::App* app, CommandLine& line, Arguments& args, const Command& command) {
  for_each_option(command, [&](const Option& option) { add_option(app, line, args, option); });
}

// Defaults, then the config file, then the environment, then the flags.
RawSettings layered_settings(const CommandLine& line, std::optional<std::string>* config_file) {
  RawSettings settings = default_settings();
  *config_file = find_config_file(line.config_path, env);
  if (*config_file) overlay(settings, read_config_file(**config_file));
  overlay(settings, environment_settings(env));
  overlay(settings, line.flags);
  return settings;
}

// Keys are used as given (any bytes), but not empty, and not one of rlock's own helper keys: a
// "lock" on a fence counter or a queue would corrupt the lock it belongs to.
// PREFIX counts: with it, a key could name another lock's fence counter ("--prefix
// '{team}:rlock:' run fence").
void check_key(const std::string& prefix, const std::string& key) {
  if (key.empty()) throw usage_error("KEY must not be empty");
  if (is_helper_key(prefix + key))
    throw usage_error("KEY '" + terminal_safe(prefix + key) +
                      "' is named like one of rlock's own helper keys (':rlock:fence', "
                      "':rlock{}:queue' ...); choose another name");
}

// Every KEY argument of COMMAND, under PREFIX.
void check_keys(const Command& command, Arguments& arguments, const std::string& prefix) {
  for_each_option(command, [&](const Option& option) {
    if (!option.positional() || std::string_view(option.names) != "KEY") return;
    if (option.into == Into::text)
      check_key(prefix, *static_cast<std::string*>(option.field(arguments)));
    if (option.into == Into::texts)
      for (const auto& key : *static_cast<std::vector<std::string>*>(option.field(arguments)))
        check_key(prefix, key);
  });
}

// Which options a parser builds: only those the command line's words name (CommandLine::words),
// or all of them, for help and for the message about a command line CLI11 refused.
enum class Build { named, all };

// The command line as CLI11 parsed it: which command was given, with what.
struct Parsed {
  CLI::App app{"rlock: run a command on at most one host of a fleet at a time, holding a Redis "
               "lock while it runs",
               "rlock"};
  CommandLine line;
  std::unique_ptr<Arguments> args;   // the command's, filled in by the parse
  const Command* command = nullptr;  // the one given, once parsed
  std::string help_topic;            // rlock help COMMAND
};

// A parser for ARGS: the main App, and the command asked for with its options. Building every
// command (an App each, a dozen options each) cost more than the rest of a run's start-up
// (measured with callgrind); when the command is not known (rlock --help, a typo) all are
// built, bare, for the help text and the error message.
std::unique_ptr<Parsed> make_parser(const SplitArgs& args, Build build) {
  auto p = std::make_unique<Parsed>();
  CLI::App& app = p->app;
  // A callback: the version text loads libssl, which only --version should pay for.
  app.set_version_flag("--version", std::function<std::string()>(version_text));
  app.require_subcommand(1);
  p->line.words = args.ours;
  p->line.every_option = build == Build::all;

  std::string wanted;
  bool asking_help = false;  // rlock help COMMAND
  for (size_t i = 0; i < args.ours.size(); ++i) {
    if (args.ours[i].rfind("-", 0) == 0) continue;
    wanted = args.ours[i];
    asking_help = wanted == "help" && i + 1 < args.ours.size() && args.ours[i + 1][0] != '-';
    if (asking_help) wanted = args.ours[i + 1];
    break;
  }
  bool known = wanted != "help" && find_command(wanted);
  for (const Command* command : all_commands()) {
    bool is_help = command->name == "help";
    if (known && command->name != wanted && !(asking_help && is_help)) continue;
    CLI::App* sub = app.add_subcommand(std::string(command->name), command->summary);
    sub->group("Commands");
    if (is_help) sub->add_option("COMMAND", p->help_topic, "a command");
    if (command->name != wanted) continue;
    if (command->make) {
      p->args = command->make();
      add_options(sub, p->line, *p->args, *command);
    }
    if (command->footer) sub->footer(command->footer);
  }
  return p;
}

// Parses ARGS with PARSER; throws CLI11's ParseError for help, --version and mistakes.
void parse(Parsed& parser, const SplitArgs& args) {
  std::vector<std::string> reversed(args.ours.rbegin(), args.ours.rend());
  try {
    parser.app.parse(reversed);
  } catch (const std::logic_error&) {
    // CLI11 2.1 reads a flag's value (--fair=maybe) with std::stoll, whose exception is no
    // ParseError: name the word.
    std::string word;
    for (const std::string& w : args.ours) {
      const SettingInfo* setting =
          w.starts_with("--") ? find_setting(w.substr(2, w.find('=') - 2)) : nullptr;
      if (setting && setting->kind == SettingKind::flag && w.find('=') != std::string::npos) {
        word = w;
        break;
      }
    }
    throw usage_error((word.empty() ? "a flag" : "'" + word + "'") +
                      ": a flag's value is true or false, or none at all");
  }
  for (CLI::App* sub : parser.app.get_subcommands())
    if (sub->parsed()) parser.command = find_command(sub->get_name());
}

// Whether WORD ("--ttl", "--ttl=5s") is an option of some command: a setting, or another
// option by its first long name (not flock's spellings, nor those it refuses).
bool known_option(std::string_view word) {
  if (!word.starts_with("--")) return false;
  std::string_view name = word.substr(0, word.find('='));
  if (find_setting(name.substr(2))) return true;
  bool known = false;
  for (const Command* command : all_commands())
    for_each_option(*command, [&](const Option& option) {
      if (option.into == Into::setting || option.positional() || option.hidden) return;
      for (std::string_view n : names_of(option.names))
        if (n.starts_with("--")) {
          known = known || n == name;
          break;
        }
    });
  return known;
}

// What to say of WORDS, typed after COMMAND's arguments: for `run`, the command it was meant
// to run without "--" before it, the likeliest mistake; else, what the command takes.
std::string unexpected_words(const Command& command, const std::vector<std::string>& words) {
  std::string list;
  for (const std::string& word : words) {
    // An assignment's value may be a secret (PGPASSWORD=... psql): its name only.
    std::string shown = is_assignment_word(word) ? word.substr(0, word.find('=')) + "=..." : word;
    list += (list.empty() ? "" : " ") + shown;
  }
  std::string message = std::string("unexpected argument") + (words.size() > 1 ? "s" : "") + " '" +
                        terminal_safe(list) + "'";
  if (command.takes_command)
    return message + ": put the command after --, as in rlock " + std::string(command.name) +
           " KEY -- COMMAND";
  // The argument its usage starts with: "KEY", "[PATTERN]", "[COMMAND]" (help), none (config).
  std::string_view usage = command.usage;
  std::string_view argument = usage.substr(0, usage.find_first_of(" \n"));
  if (argument.starts_with('[')) argument = argument.substr(1, argument.find(']') - 1);
  return message + ": rlock " + std::string(command.name) + " takes " +
         (argument.empty() ? "no arguments" : "one " + std::string(argument));
}

// Prints the help or version asked for, or throws the usage error for what CLI11 refused.
int report(const CLI::ParseError& e, Parsed& parser, const SplitArgs& args) {
  CLI::App& app = parser.app;
  if (dynamic_cast<const CLI::CallForHelp*>(&e) || dynamic_cast<const CLI::CallForAllHelp*>(&e)) {
    const Command* command = app.get_subcommands().empty()
                                 ? nullptr
                                 : find_command(app.get_subcommands().front()->get_name());
    write_stdout(command ? command_help(*command) : overview_help());
    return k_exit_ok;
  }
  if (e.get_exit_code() == 0) {  // --version: checked like every write to stdout
    std::ostringstream out;
    int status = app.exit(e, out, out);
    write_stdout(out.str());
    return status;
  }
  // A value that took the next word for its own (run -w KEY -- CMD) leaves an argument
  // missing, or one over: the value is the mistake to name.
  for (const auto& [name, value] : parser.line.flags) check_value(name, value);
  if (parser.args) parser.args->check_values();
  std::string where = app.get_subcommands().empty()
                          ? "rlock --help"
                          : "rlock " + app.get_subcommands().front()->get_name() + " --help";
  std::string message = e.what();
  if (app.get_subcommands().empty() && !args.ours.empty() && args.ours.front()[0] != '-')
    message = unknown_command(args.ours.front());
  else if (app.get_subcommands().empty() && dynamic_cast<const CLI::RequiredError*>(&e))
    message = "no command given (commands: " + command_list() + ")";
  if (dynamic_cast<const CLI::ExtrasError*>(&e) && !app.get_subcommands().empty()) {
    // CLI11 calls both an unknown flag and a command without '--' "not expected", and lists
    // the words backwards.
    std::vector<std::string> extras = app.get_subcommands().front()->remaining();
    std::string name = app.get_subcommands().front()->get_name();
    const Command* command = find_command(name);
    if (!extras.empty() && extras.front().rfind("-", 0) == 0)
      message =
          known_option(extras.front())
              ? "rlock " + name + " takes no " + extras.front().substr(0, extras.front().find('='))
          : command ? unknown_option(*command, extras.front())
                    : "unknown option '" + terminal_safe(extras.front()) + "'";
    else if (!extras.empty() && command)
      message = unexpected_words(*command, extras);
  }
  // "...: did you mean --wait? See 'rlock run --help'."
  if (message.ends_with('?')) throw usage_error(message + " See '" + where + "'.");
  throw usage_error(message + "; see '" + where + "'");
}

// rlock help COMMAND on a terminal, as git help does: its page, rlock-COMMAND(1), through man(1),
// when one is installed; returns (for the --help text) when not, or not on a terminal.
void open_manual_page(const Command& command) {
  if (!::isatty(STDOUT_FILENO) || command.name == "help") return;
  // The name is one of the commands', so the shell sees no word of the user's.
  std::string page = "rlock-" + std::string(command.name);
  if (std::system(("man -w " + page + " >/dev/null 2>&1").c_str()) != 0) return;
  std::fflush(stdout);
  ::execlp("man", "man", page.c_str(), static_cast<char*>(nullptr));
}

// rlock help [COMMAND].
int show_help(Parsed& parser) {
  if (parser.help_topic.empty()) {
    write_stdout(overview_help());
    return k_exit_ok;
  }
  if (parser.help_topic == "connection") {
    write_stdout(connection_help());
    return k_exit_ok;
  }
  const Command* topic = find_command(parser.help_topic);
  if (!topic) throw usage_error("help: " + unknown_command(parser.help_topic));
  open_manual_page(*topic);  // returns when there is none to show
  write_stdout(command_help(*topic));
  return k_exit_ok;
}

// Parses the command line split at "--" and runs the command it names.
int parse_and_run(const SplitArgs& args) {
  auto parser = make_parser(args, Build::named);
  bool parsed = true;
  try {
    parse(*parser, args);
  } catch (const CLI::ParseError&) {
    parsed = false;
  }
  if (!parsed || parser->command->name == "help") {
    // Help and errors are told with every option built (see CommandLine::words).
    parser = make_parser(args, Build::all);
    try {
      parse(*parser, args);
    } catch (const CLI::ParseError& e) {
      return report(e, *parser, args);
    }
    if (parser->command->name == "help") return show_help(*parser);
  }

  const Command& command = *parser->command;
  CommandLine& line = parser->line;
  if (!args.command.empty() && !command.takes_command)
    throw usage_error("'--' COMMAND is only for rlock run");
  if (!line.flock_only.empty()) throw usage_error(flock_only_message(line.flock_only));
  if (line.exclusive) {  // -x: not shared, whatever the config file says
    if (line.flags.count("shared") && line.flags["shared"].values[0] == "true")
      throw usage_error("--exclusive excludes --shared");
    line.flags["shared"] = RawValue{{"false"}, {Origin::Kind::flag, "--exclusive"}};
  }
  if (line.no_wait) {
    if (line.flags.count("wait")) throw usage_error("--no-wait excludes --wait");
    line.flags["wait"] = RawValue{{"0"}, {Origin::Kind::flag, "--no-wait"}};
  }
  // The keys and the command first: they are this invocation's, and the likelier mistake.
  Arguments& arguments = *parser->args;
  check_keys(command, arguments, "");
  arguments.check(args.command);

  std::optional<std::string> config_file;
  RawSettings settings;
  Resolved resolved;
  if (command.reads_settings) {
    settings = layered_settings(line, &config_file);
    resolved = resolve_settings(settings);
    set_verbosity(resolved.global.verbosity);
    set_log_format(resolved.global.log_format);
    if (!resolved.global.prefix.empty()) check_keys(command, arguments, resolved.global.prefix);
  }
  return arguments.run(Invocation{args.command, settings, config_file, resolved});
}

}  // namespace

int run_command_line(int argc, char** argv) {
  SplitArgs args = split_at_double_dash(argc, argv);
  hide_url_passwords(argc, argv);  // read: from here on only ARGS holds the words
  return parse_and_run(args);
}

}  // namespace rlock
