#include "cli.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <hiredis/hiredis.h>
#include <sstream>
#include <string_view>

#include "config_file.h"
#include "error.h"
#include "lock.h"
#include "output.h"
#include "settings.h"
#include "tls.h"
#include "verbs/verbs.h"

#ifndef RLOCK_VERSION
#define RLOCK_VERSION "0.0.0"
#endif

namespace rlock {

namespace {

constexpr const char* k_duration_help = "(500ms, 30s, 5m, 1h30m, 2d; a bare number is seconds)";

// The commands, in the order help lists them.
constexpr std::array<std::string_view, 10> k_commands = {"run",    "status",  "inspect", "history",
                                                         "list",   "acquire", "extend",  "release",
                                                         "config", "help"};

std::string command_list() {
  std::string out;
  for (std::string_view c : k_commands) out += (out.empty() ? "" : ", ") + std::string(c);
  return out;
}

// Whether COMMAND was built (see parse_and_run) and is the one given.
bool chosen(const CLI::App* command) { return command && command->parsed(); }

std::string version_text() {
  std::string tls = tls_library_version().value_or("not found");
  return std::string("rlock ") + RLOCK_VERSION + " (hiredis " + std::to_string(HIREDIS_MAJOR) +
         "." + std::to_string(HIREDIS_MINOR) + "." + std::to_string(HIREDIS_PATCH) +
         "; TLS: " + tls + ", loaded for rediss:// only)";
}

const char* env(const char* name) { return std::getenv(name); }

// What the command line says: settings given as flags (by long name), and the rest.
struct CommandLine {
  RawSettings flags;
  std::optional<std::string> config_path;
  std::string key;
  std::vector<std::string> keys;  // status
  std::string pattern = "*";      // list
  std::optional<std::string> shell_command;
  std::optional<std::string> token;
  bool no_wait = false;
  bool force = false;
  bool json = false;
  int count = 10;  // history -n

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
CLI::Option* add_setting(CLI::App* app, CommandLine& line, const std::string& names,
                         const std::string& setting, const std::string& help,
                         const std::string& type) {
  if (!line.named(names)) return nullptr;
  CLI::Option* opt;
  if (setting == "redis") {
    // Repeatable (Redlock): --redis A --redis B; each takes one value.
    opt = app->add_option_function<std::vector<std::string>>(
        names,
        [&line, setting](const std::vector<std::string>& values) {
          line.flags[setting] = RawValue{values, {Origin::Kind::flag, "--" + setting}};
        },
        help);
    opt->allow_extra_args(false);
  } else {
    opt = app->add_option_function<std::string>(
        names,
        [&line, setting](const std::string& value) {
          line.flags[setting] = RawValue{{value}, {Origin::Kind::flag, "--" + setting}};
        },
        help);
  }
  opt->type_name(type);
  return opt;
}

void add_flag_setting(CLI::App* app, CommandLine& line, const std::string& names,
                      const std::string& setting, const std::string& help) {
  if (!line.named(names)) return;
  app->add_flag_function(
      names,
      [&line, setting](int64_t) {
        line.flags[setting] = RawValue{{"true"}, {Origin::Kind::flag, "--" + setting}};
      },
      help);
}

// The options every verb takes: where Redis is and how to reach it.
void add_connection_options(CLI::App* app, CommandLine& line) {
  add_setting(app, line, "--redis", "redis",
              "Redis URL: redis://[user[:pass]@]host[:port][/db], rediss://... (TLS), "
              "unix:///path[?db=N] or redis-sentinel://host[:port][,host...]/name; given "
              "more than once: Redlock (default $RLOCK_REDIS_URL, else redis://127.0.0.1:6379)",
              "URL");
  if (line.named("--config"))
    app->add_option("--config", line.config_path,
                    "config file (default $RLOCK_CONFIG, ~/.config/rlock/config.toml, "
                    "/etc/rlock/config.toml)")
        ->type_name("FILE");
  add_setting(app, line, "--prefix", "prefix", "prepended to every key", "TEXT");
  add_setting(app, line, "--password-file", "password-file",
              "read the Redis password from FILE (or use RLOCK_PASSWORD, REDISCLI_AUTH)", "FILE");
  add_setting(app, line, "--cacert", "cacert", "CA certificate bundle for rediss://", "FILE");
  add_setting(app, line, "--cacertdir", "cacertdir", "directory of CA certificates", "DIR");
  add_setting(app, line, "--cert", "cert", "client certificate for rediss://", "FILE");
  add_setting(app, line, "--key", "key", "private key of --cert", "FILE");
  add_setting(app, line, "--sni", "sni", "TLS server name to send and verify", "NAME");
  add_setting(app, line, "--connect-timeout", "connect-timeout", "connect timeout (default 2s)",
              "D");
  add_setting(app, line, "--command-timeout", "command-timeout",
              "timeout of one Redis command (default 3s)", "D");
  add_setting(app, line, "--log-format", "log-format",
              "events on stderr as text (default) or json, one object a line", "text|json");
  add_flag_setting(app, line, "-q,--quiet", "quiet", "print only errors");
  add_flag_setting(app, line, "-v,--verbose", "verbose",
                   "print every event (acquired, renewed, released)");
}

void add_json(CLI::App* app, CommandLine& line) {
  if (line.named("--json"))
    app->add_flag("--json", line.json, "print one JSON document (fields in rlock(1))");
}

// Keys are used as given (any bytes), but not empty, and not one of rlock's own helper keys: a
// "lock" on a fence counter or a queue would corrupt the lock it belongs to.
void check_key(const std::string& key) {
  if (key.empty()) throw usage_error("KEY must not be empty");
  if (is_helper_key(key))
    throw usage_error("KEY '" + key + "' is named like one of rlock's own helper keys (" +
                      "':rlock:fence', ':rlock:queue' ...); choose another name");
}

void add_key(CLI::App* app, CommandLine& line) {
  app->add_option("KEY", line.key, "the lock's Redis key (after --prefix)")->required();
}

void add_wait_settings(CLI::App* app, CommandLine& line) {
  if (line.named("-n,--no-wait"))
    app->add_flag("-n,--no-wait", line.no_wait, "fail at once when held (default)");
  add_setting(app, line, "-w,--wait", "wait",
              std::string("wait up to D for the lock ") + k_duration_help + ", or inf", "D");
  add_setting(app, line, "-E,--conflict-exit-code", "conflict-exit-code",
              "exit status when the lock is not obtained (default 75)", "N");
  add_setting(app, line, "--limit", "limit",
              "a semaphore: up to N holders at once (use the same N everywhere for a key)", "N");
  add_flag_setting(app, line, "--fair", "fair", "serve waiters in arrival order");
  add_setting(app, line, "--min-replicas", "min-replicas",
              "start only once N replicas have the lock (WAIT); renewals too", "N");
}

// The settings of `run` (also accepted by `config`, to show what a run would use).
void add_run_settings(CLI::App* run, CommandLine& line) {
  add_setting(run, line, "--ttl", "ttl", "lock expiry, renewed every ttl/3 (default 30s)", "D");
  add_setting(run, line, "--max-run", "max-run", "stop the command after D; exit 124", "D");
  add_setting(run, line, "--kill-signal", "kill-signal",
              "signal that stops the command on loss or --max-run (default TERM)", "SIG");
  add_setting(run, line, "--kill-after", "kill-after",
              "send KILL this long after the kill signal (default 5s, or ttl/3 if shorter)", "D");
  add_setting(run, line, "--on-lost", "on-lost",
              "when the lock is lost: kill the command (default) or ignore it", "kill|ignore");
  add_setting(run, line, "--leftovers", "leftovers",
              "processes the command left in its process group: wait for them, holding the "
              "lock (default), or kill them",
              "wait|kill");
  add_setting(run, line, "--min-hold", "min-hold",
              "keep the lock until D after acquisition even if the command ends sooner", "D");
  add_setting(run, line, "--metrics-file", "metrics-file",
              "add this run's counters to a Prometheus textfile (node_exporter)", "PATH");
  add_setting(run, line, "--once-per", "once-per",
              "run at most once per period: hour, day, week, month, or a duration (1h, 1d)",
              "PERIOD");
  add_setting(run, line, "--tz", "tz", "time zone of --once-per's calendar periods (default UTC)",
              "ZONE");
  add_flag_setting(run, line, "--retry-failed", "retry-failed",
                   "--once-per: run again when this period's run failed or was lost");
  add_flag_setting(run, line, "--record-skips", "record-skips",
                   "record busy and already-done runs in the history too");
  add_setting(run, line, "--history-length", "history-length",
              "runs kept in the key's history (default 1000; 0 keeps none)", "N");
}

void add_run_options(CLI::App* run, CommandLine& line) {
  add_key(run, line);
  if (line.named("-c,--command"))
    run->add_option("-c,--command", line.shell_command,
                    "run TEXT with $SHELL -c (or /bin/sh) instead of COMMAND")
        ->type_name("TEXT");
  add_wait_settings(run, line);
  add_run_settings(run, line);
  run->footer("Forms:\n"
              "  rlock run [OPTIONS] KEY -- COMMAND [ARG...]   COMMAND exec'd as given, no shell\n"
              "  rlock run [OPTIONS] KEY -c 'SHELL TEXT'        TEXT run by $SHELL -c\n\n"
              "The command gets RLOCK_KEY, RLOCK_TOKEN, RLOCK_FENCE and RLOCK_TTL_MS.\n"
              "Exit status: the command's own; 64 usage, 69 Redis unavailable, 75 busy, 76 lock "
              "lost, 78 configuration, 124 --max-run, 125 rlock failed, 126/127 cannot run.\n");
}

// argv split at the first "--": CLI11 sees what comes before, the command is what comes after
// (exec'd as given, so its own flags never reach our parser).
struct SplitArgs {
  std::vector<std::string> ours;
  std::vector<std::string> command;
};

SplitArgs split_at_double_dash(int argc, char** argv) {
  SplitArgs out;
  int i = 1;
  for (; i < argc && std::strcmp(argv[i], "--") != 0; ++i) out.ours.emplace_back(argv[i]);
  for (++i; i < argc; ++i) out.command.emplace_back(argv[i]);
  return out;
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

// The command line split at "--", parsed with every option built or only those its words name
// (CommandLine::words), and run.
int parse_and_run(const SplitArgs& args, bool every_option) {
  CLI::App app{"rlock: run a command as a cluster singleton, holding a Redis lock while it runs",
               "rlock"};
  // A callback: the version text loads libssl, which only --version should pay for.
  app.set_version_flag("--version", std::function<std::string()>(version_text));
  app.require_subcommand(1);
  app.get_formatter()->column_width(34);
  app.footer("Exit status: the command's own; 64 usage, 69 Redis unavailable, 75 busy, 76 lock "
             "lost, 78 configuration, 124 --max-run, 125 rlock failed, 126/127 cannot run.\n"
             "See rlock(1).");

  CommandLine line;
  line.words = args.ours;
  line.every_option = every_option;
  // Only the command asked for is built, with its options: building every command (an App
  // each, a dozen options each) cost more than the rest of a run's start-up (measured with
  // callgrind). When the command is not known (rlock --help, a typo) all are built, bare, for
  // the help text and the error message.
  std::string wanted;
  bool asking_help = false;  // rlock help COMMAND
  for (size_t i = 0; i < args.ours.size(); ++i) {
    if (args.ours[i].rfind("-", 0) == 0) continue;
    wanted = args.ours[i];
    asking_help = wanted == "help" && i + 1 < args.ours.size();
    if (asking_help) wanted = args.ours[i + 1];
    break;
  }
  bool known = wanted != "help" &&
               std::find(k_commands.begin(), k_commands.end(), wanted) != k_commands.end();
  auto add_command = [&](const char* name, const char* description) -> CLI::App* {
    bool build = !known || wanted == name || (asking_help && std::strcmp(name, "help") == 0);
    return build ? app.add_subcommand(name, description) : nullptr;
  };

  CLI::App* run = add_command("run", "hold KEY while COMMAND runs");
  if (wanted == "run") {
    add_run_options(run, line);
    add_connection_options(run, line);
  }

  CLI::App* status = add_command("status", "one line per key: free, or held by whom");
  if (wanted == "status") {
    status->add_option("KEY", line.keys, "lock keys (after --prefix)")->required();
    add_json(status, line);
    add_connection_options(status, line);
    status->footer("Exit status: 0 every key held, 1 some key free, 69 Redis unreachable or a "
                   "key that is not a lock.");
  }

  CLI::App* inspect = add_command("inspect", "everything known about one lock");
  if (wanted == "inspect") {
    add_key(inspect, line);
    add_json(inspect, line);
    add_connection_options(inspect, line);
    inspect->footer("Exit status: 0 held, 1 free, 69 Redis unreachable or not a lock.");
  }

  CLI::App* history = add_command("history", "the latest runs of KEY, newest first");
  if (wanted == "history") {
    add_key(history, line);
    history->add_option("-n,--count", line.count, "how many runs (default 10)")
        ->type_name("N")
        ->check(CLI::Range(1, 100000));
    add_json(history, line);
    add_connection_options(history, line);
    history->footer("Exit status: 0, also when there is no history yet; 69 Redis unreachable.");
  }

  CLI::App* list = add_command("list", "every lock under the prefix that matches PATTERN");
  if (wanted == "list") {
    list->add_option("PATTERN", line.pattern, "a Redis glob after --prefix (default *)");
    add_json(list, line);
    add_connection_options(list, line);
  }

  CLI::App* acquire = add_command("acquire", "take the lock, print its token, exit");
  if (wanted == "acquire") {
    add_key(acquire, line);
    add_wait_settings(acquire, line);
    add_setting(acquire, line, "--ttl", "ttl", "lock expiry; extend it before then (default 30s)",
                "D");
    add_json(acquire, line);
    add_connection_options(acquire, line);
    acquire->footer("Prints only the token: t=$(rlock acquire KEY). Nothing renews the lock:\n"
                    "run rlock extend before the ttl runs out, and rlock release at the end.");
  }

  CLI::App* extend = add_command("extend", "renew a lock taken with acquire");
  if (wanted == "extend") {
    add_key(extend, line);
    extend->add_option("--token", line.token, "the token acquire printed")
        ->required()
        ->type_name("T");
    add_setting(extend, line, "--ttl", "ttl", "the new expiry, from now (default 30s)", "D");
    add_connection_options(extend, line);
    extend->footer("Exit status: 0 extended, 1 not ours (nothing changed).");
  }

  CLI::App* release = add_command("release", "give a lock back, or break anyone's");
  if (wanted == "release") {
    add_key(release, line);
    release->add_option("--token", line.token, "the token acquire printed")->type_name("T");
    release->add_flag("--force", line.force, "break the lock whoever holds it; says whose it was");
    add_connection_options(release, line);
    release->footer("Exit status: 0 released, 1 not ours or free (nothing changed).");
  }

  CLI::App* config = add_command("config", "print the effective configuration and where each value "
                                           "came from, secrets redacted");
  if (wanted == "config") {
    add_wait_settings(config, line);
    add_run_settings(config, line);
    add_json(config, line);
    add_connection_options(config, line);
  }

  CLI::App* help = add_command("help", "show the help of a command");
  std::string help_topic;
  if (help) help->add_option("COMMAND", help_topic, "a command");

  std::vector<std::string> reversed(args.ours.rbegin(), args.ours.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    // Help and errors are told with every option built (see CommandLine::words).
    if (!every_option) return parse_and_run(args, true);
    if (e.get_exit_code() == 0) {  // --help, --version: checked like every write to stdout
      std::ostringstream out;
      int status = app.exit(e, out, out);
      write_stdout(out.str());
      return status;
    }
    std::string where = app.get_subcommands().empty()
                            ? "rlock --help"
                            : "rlock " + app.get_subcommands().front()->get_name() + " --help";
    std::string message = e.what();
    if (app.get_subcommands().empty() && !args.ours.empty() && args.ours.front()[0] != '-')
      message = "unknown command '" + args.ours.front() + "' (commands: " + command_list() + ")";
    if (dynamic_cast<const CLI::ExtrasError*>(&e) && !app.get_subcommands().empty()) {
      // CLI11 calls both an unknown flag and a command without '--' "not expected".
      std::vector<std::string> extras = app.get_subcommands().front()->remaining();
      if (!extras.empty() && extras.front().rfind("-", 0) == 0)
        message = "unknown option '" + extras.front() + "'";
      else if (chosen(run))
        message += " (put '--' before the command: rlock run KEY -- COMMAND)";
    }
    throw usage_error(message + "; see '" + where + "'");
  }

  if (chosen(help)) {
    if (!every_option) return parse_and_run(args, true);
    if (help_topic.empty()) {
      // Not app.help(): that shows the help of the command given, here `help` itself.
      write_stdout(app.get_formatter()->make_help(&app, "rlock", CLI::AppFormatMode::Normal));
      return k_exit_ok;
    }
    CLI::App* topic = nullptr;
    try {
      topic = app.get_subcommand(help_topic);
    } catch (const CLI::OptionNotFound&) {}
    if (!topic || topic == help) throw usage_error("help: no command '" + help_topic + "'");
    write_stdout(topic->help("rlock"));
    return k_exit_ok;
  }

  if (!args.command.empty() && !chosen(run))
    throw usage_error("'--' COMMAND is only for rlock run");
  if (line.no_wait) {
    if (line.flags.count("wait")) throw usage_error("--no-wait excludes --wait");
    line.flags["wait"] = RawValue{{"0"}, {Origin::Kind::flag, "--no-wait"}};
  }
  for (const auto& key : line.keys) check_key(key);
  if (chosen(inspect) || chosen(history) || chosen(acquire) || chosen(extend) || chosen(release))
    check_key(line.key);
  if (chosen(run)) {
    // The key and the command first: they are this invocation's, and the likelier mistake.
    check_key(line.key);
    if (line.shell_command && !args.command.empty())
      throw usage_error("give either -c 'TEXT' or -- COMMAND, not both");
    if (!line.shell_command && args.command.empty())
      throw usage_error("missing command: rlock run KEY -- COMMAND [ARG...], or -c 'TEXT'");
  }

  std::optional<std::string> config_file;
  RawSettings settings = layered_settings(line, &config_file);
  Resolved resolved = resolve_settings(settings);
  set_verbosity(resolved.global.verbosity);
  set_log_format(resolved.global.log_format);

  const GlobalOptions& global = resolved.global;
  std::string key = global.prefix + line.key;
  if (chosen(config)) return config_verb(settings, config_file, line.json);
  if (chosen(status)) {
    std::vector<std::string> keys;
    for (const auto& k : line.keys) keys.push_back(global.prefix + k);
    return status_verb(global, keys, line.json);
  }
  if (chosen(inspect)) return inspect_verb(global, key, line.json);
  if (chosen(history)) return history_verb(global, key, line.count, line.json);
  if (chosen(list)) return list_verb(global, line.pattern, line.json);
  if (chosen(extend)) return extend_verb(global, key, *line.token, resolved.run.ttl);
  if (chosen(release)) return release_verb(global, key, line.token, line.force);
  if (chosen(acquire)) {
    resolved.run.key = key;
    return acquire_verb(global, resolved.run, line.json);
  }

  RunOptions options = std::move(resolved.run);
  options.key = key;
  options.command = args.command;
  options.shell_command = line.shell_command;
  return run_verb(resolved.global, options);
}

}  // namespace

int run_command_line(int argc, char** argv) {
  return parse_and_run(split_at_double_dash(argc, argv), false);
}

}  // namespace rlock
