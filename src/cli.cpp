#include "cli.h"

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
  bool exclusive = false;      // flock's -x: the default
  std::string flock_only;      // a flock option with no meaning here (refused after the parse)
  std::optional<int> while_pid;  // acquire
  bool force = false;            // release
  bool now = false;
  bool all = false;
  bool json = false;
  int count = 10;  // history -n
  std::string every;  // check --every

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

// Whether WORD, an option typed before the command, takes the next word as its value: a
// setting that is not a flag ("--redis URL", "-u URL", "-qu URL"), --config, --token,
// --while-pid or --every. Other options
// are taken for flags here; the command's parser has the last word on them.
bool takes_next_word(std::string_view word) {
  if (word.starts_with("--")) {
    std::string_view name = word.substr(2);
    if (name.find('=') != std::string_view::npos) return false;
    const SettingInfo* setting = find_setting(name);
    return name == "config" || name == "token" || name == "while-pid" || name == "every" ||
           (setting && setting->flags && setting->kind != SettingKind::flag);
  }
  for (size_t i = 1; i < word.size(); ++i) {  // -qv, -u URL, -uURL
    const SettingInfo* setting = nullptr;
    for (const SettingInfo& s : all_settings())
      if (s.flags && s.flags[0] == '-' && s.flags[1] == word[i] && s.flags[2] == ',') setting = &s;
    if (!setting) return false;
    if (setting->kind != SettingKind::flag) return i + 1 == word.size();
  }
  return false;
}

// The words with the command first: options typed before it (rlock --redis URL status KEY,
// as git and kubectl take them) move to just after it, in the order typed, where the
// command's parser reads them as its own: one meaning and one precedence wherever they are.
std::vector<std::string> command_first(std::vector<std::string> words) {
  size_t at = 0;
  while (at < words.size() && words[at].size() > 1 && words[at][0] == '-') {
    if (words[at] == "--help" || words[at] == "-h" || words[at] == "--version") return words;
    at += takes_next_word(words[at]) ? 2 : 1;
  }
  if (at == 0 || at >= words.size()) return words;
  std::rotate(words.begin(), words.begin() + static_cast<std::ptrdiff_t>(at),
              words.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  return words;
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
  out.ours = command_first(std::move(out.ours));
  return out;
}

// An option of a command: a setting (settings.h), with HELP in place of the setting's own
// when set, or one of the plain options below.
struct OptionRef {
  std::string_view name;
  const char* help = nullptr;
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

CLI::Option* add_token(CLI::App* app, CommandLine& line) {
  return app->add_option("--token", line.token, "the token acquire printed")->type_name("T");
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

// The options that are not settings: this invocation's own, never in a config file.
struct PlainOption {
  std::string_view name;
  void (*add)(CLI::App* app, CommandLine& line);
};

const PlainOption k_plain_options[] = {
    {"KEY",
     [](CLI::App* app, CommandLine& line) {
       app->add_option("KEY", line.key, "the lock's Redis key (after --prefix)")->required();
     }},
    {"KEY...",
     [](CLI::App* app, CommandLine& line) {
       app->add_option("KEY", line.keys, "lock keys (after --prefix)")->required();
     }},
    {"PATTERN",
     [](CLI::App* app, CommandLine& line) {
       app->add_option("PATTERN", line.pattern, "a Redis glob after --prefix (default *)");
     }},
    {"command",
     [](CLI::App* app, CommandLine& line) {
       if (line.named("-c,--command"))
         app->add_option("-c,--command", line.shell_command,
                         "run TEXT with $SHELL -c (or /bin/sh) instead of COMMAND")
             ->type_name("TEXT");
     }},
    {"no-wait",
     [](CLI::App* app, CommandLine& line) {
       if (line.named("-n,--no-wait,--nonblock,--nb"))
         app->add_flag("-n,--no-wait,--nonblock,--nb", line.no_wait,
                       "fail at once when held (default)");
     }},
    // flock(1)'s spellings, so that `flock -xn FILE CMD` becomes `rlock run -xn KEY -- CMD`:
    // -n/--nonblock/--nb, -w/--timeout, -E, -c and -s are the same options; -x is the default.
    // What has no meaning for a lock in Redis is refused with what rlock offers instead.
    {"exclusive",
     [](CLI::App* app, CommandLine& line) {
       if (line.named("-x,--exclusive"))
         app->add_flag("-x,--exclusive", line.exclusive,
                       "hold the lock alone, as flock -x (the default)");
     }},
    {"flock-only",
     [](CLI::App* app, CommandLine& line) {
       // Not -u: it is --redis here, as in redis-cli.
       for (const char* names : {"-F,--no-fork", "-o,--close", "--unlock", "--fcntl"})
         if (line.named(names))
           app->add_flag_callback(
                  names, [&line, names] { line.flock_only = names; }, "")
               ->group("");  // flock's, refused: not in the help
     }},
    {"config",
     [](CLI::App* app, CommandLine& line) {
       if (line.named("--config"))
         app->add_option("--config", line.config_path,
                         "config file (default $RLOCK_CONFIG, ~/.config/rlock/config.toml, "
                         "/etc/rlock/config.toml)")
             ->type_name("FILE");
     }},
    {"json",
     [](CLI::App* app, CommandLine& line) {
       if (line.named("--json"))
         app->add_flag("--json", line.json, "print one JSON document (fields in rlock(1))");
     }},
    {"json lines",
     [](CLI::App* app, CommandLine& line) {
       if (line.named("--json"))
         app->add_flag("--json", line.json, "print one JSON object a line (fields in rlock(1))");
     }},
    {"count",
     [](CLI::App* app, CommandLine& line) {
       app->add_option("-n,--count", line.count, "how many runs (default 10)")
           ->type_name("N")
           ->check(CLI::Range(1, 100000));
     }},
    {"every",
     [](CLI::App* app, CommandLine& line) {
       app->add_option("--every", line.every,
                       "a run must have succeeded within the last PERIOD: a duration (25h), or "
                       "the current hour, day, week or month (in --tz)")
           ->type_name("PERIOD")
           ->required();
     }},
    {"token", [](CLI::App* app, CommandLine& line) { add_token(app, line); }},
    {"token (required)",
     [](CLI::App* app, CommandLine& line) { add_token(app, line)->required(); }},
    {"force",
     [](CLI::App* app, CommandLine& line) {
       app->add_flag("--force", line.force,
                     "break the lock whoever holds it (with --token: only that holder's); it "
                     "stays taken until the holder has surely stopped");
     }},
    {"while-pid",
     [](CLI::App* app, CommandLine& line) {
       if (line.named("--while-pid"))
         app->add_option("--while-pid", line.while_pid,
                         "keep the lock while process PID lives (a detached keeper renews it), "
                         "give it back when PID exits, signal PID if it is lost")
             ->type_name("PID")
             ->check(CLI::Range(1, 1 << 22));
     }},
    {"now",
     [](CLI::App* app, CommandLine& line) {
       if (line.named("--now"))
         app->add_flag("--now", line.now,
                       "with --force: free it at once (the holder is known to be dead)");
     }},
    {"all",
     [](CLI::App* app, CommandLine& line) {
       if (line.named("--all"))
         app->add_flag("--all", line.all,
                       "with --force: every place of a semaphore (--limit) or shared lock "
                       "(--shared)");
     }},
};

// Option groups that several commands take, in help's order.
// Where Redis is and how to reach it: every command that talks to Redis.
constexpr OptionRef k_connection[] = {
    {"redis"},      {"tls"},   {"config"}, {"prefix"}, {"password-file"}, {"password-command"},   {"cacert"},
    {"cacertdir"},  {"cert"},  {"key"},    {"sni"},    {"connect-timeout"}, {"command-timeout"},
    {"log-format"}, {"quiet"}, {"verbose"}};
// How to wait for the lock, and what kind of lock it is.
constexpr OptionRef k_waiting[] = {{"no-wait"}, {"wait"},  {"conflict-exit-code"},
                                   {"shared"},  {"exclusive"}, {"limit"},
                                   {"fair"},    {"min-replicas"}, {"flock-only"}};
// The settings of `run` (also accepted by `config`, to show what a run would use).
constexpr OptionRef k_running[] = {
    {"ttl"},          {"max-run"},      {"heartbeat-file"}, {"stale-after"},
    {"kill-signal"},  {"kill-after"},   {"on-lost"},        {"leftovers"},
    {"min-hold"},     {"metrics-file"}, {"once-per"},       {"tz"},
    {"retry-failed"}, {"record-skips"}, {"history-length"}, {"retention"}};
constexpr OptionRef k_json[] = {{"json"}};

// Each command's own options.
constexpr OptionRef k_run_args[] = {{"KEY"}, {"command"}};
constexpr OptionRef k_status_args[] = {{"KEY..."}, {"json"}};
constexpr OptionRef k_watch_args[] = {{"KEY..."}, {"json lines"}};
constexpr OptionRef k_key_json[] = {{"KEY"}, {"json"}};
constexpr OptionRef k_history_args[] = {{"KEY"}, {"count"}, {"json"}};
constexpr OptionRef k_check_args[] = {
    {"KEY"}, {"every"}, {"tz", "time zone of --every's calendar periods (default UTC)"}, {"json"}};
constexpr OptionRef k_list_args[] = {{"PATTERN"}, {"json"}};
constexpr OptionRef k_key[] = {{"KEY"}};
constexpr OptionRef k_acquire_ttl[] = {
    {"ttl", "lock expiry; extend it before then (default 30s), or --while-pid renews it"},
    {"retention"},
    {"json"},
    {"while-pid"},
    {"kill-signal", "with --while-pid: the signal PID gets if the lock is lost (default TERM)"},
    {"kill-after", "with --while-pid: SIGKILL this long after it (default min(5s, ttl/3))"},
    {"on-lost", "with --while-pid: kill (default), or ignore: only stop renewing"}};
constexpr OptionRef k_extend_args[] = {
    {"KEY"}, {"token (required)"}, {"ttl", "the new expiry, from now (default 30s)"}};
constexpr OptionRef k_release_args[] = {{"KEY"}, {"token"}, {"force"}, {"now"}, {"all"}};
constexpr OptionRef k_reset_period_args[] = {
    {"KEY"},
    {"once-per", "the job's period: hour, day, week, month, or a duration (1h, 1d)"},
    {"tz"},
    {"history-length"},
    {"retention"}};

// What a command runs with: the command line, and the settings from every source.
struct Invocation {
  const CommandLine& line;
  const std::vector<std::string>& command;  // after "--"
  const RawSettings& settings;
  const std::optional<std::string>& config_file;
  Resolved& resolved;

  std::string key() const { return resolved.global.prefix + line.key; }
};

int run_run(const Invocation& in) {
  RunOptions options = std::move(in.resolved.run);
  options.key = in.key();
  options.command = in.command;
  options.shell_command = in.line.shell_command;
  return run_verb(in.resolved.global, options);
}

int run_status(const Invocation& in) {
  std::vector<std::string> keys;
  for (const auto& k : in.line.keys) keys.push_back(in.resolved.global.prefix + k);
  return status_verb(in.resolved.global, keys, in.line.json);
}

int run_acquire(const Invocation& in) {
  in.resolved.run.key = in.key();
  return acquire_verb(in.resolved.global, in.resolved.run, in.line.json, in.line.while_pid);
}

// --every's period, or a usage error.
Period every_period(const CommandLine& line) {
  auto period = parse_period(line.every);
  if (!period)
    throw usage_error("--every '" + line.every + "' is neither hour, day, week, month nor a " +
                      "duration of whole seconds (25h, 1d, 90m ...)");
  return *period;
}

int run_check(const Invocation& in) {
  CheckOptions options{in.key(), in.line.every, every_period(in.line), in.resolved.run.tz,
                       in.line.json};
  return check_verb(in.resolved.global, options);
}

// A key watched twice would print each of its changes twice.
void check_watch(const CommandLine& line, const std::vector<std::string>&) {
  for (size_t i = 0; i < line.keys.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (line.keys[i] == line.keys[j])
        throw usage_error("KEY '" + line.keys[i] + "' is given twice");
}

// What only `run` can get wrong, checked before any setting is read.
void check_run(const CommandLine& line, const std::vector<std::string>& command) {
  if (line.shell_command && !command.empty())
    throw usage_error("give either -c 'TEXT' or -- COMMAND, not both");
  if (!line.shell_command && command.empty())
    throw usage_error("missing command: rlock run KEY -- COMMAND [ARG...], or -c 'TEXT'");
}

// The commands, in the order help lists them: each one's arguments, options, the footer of its
// help, what it checks before any setting is read, and what runs it. A new command is an entry
// here and a function in verbs.h.
struct Command {
  std::string_view name;
  const char* summary;
  const char* usage;  // what follows "rlock NAME [OPTIONS]"; one form a line
  std::array<std::span<const OptionRef>, 4> options;  // groups of options, in help's order
  const char* footer;  // ends with the command's exit statuses (test_docs.py checks them)
  void (*check)(const CommandLine& line, const std::vector<std::string>& command);
  int (*run)(const Invocation& in);
};

// Static data, built by the compiler: a run pays nothing for the commands it does not run.
constexpr Command k_commands[] = {
    {"run",
     "hold KEY while COMMAND runs",
     "KEY -- COMMAND [ARG...]\nKEY -c 'SHELL TEXT'",
     {k_run_args, k_waiting, k_running, k_connection},
     "COMMAND is exec'd as given, without a shell; -c TEXT is run by $SHELL -c (or /bin/sh).\n"
     "The command gets RLOCK_KEY, RLOCK_TOKEN, RLOCK_FENCE and RLOCK_TTL_MS (and "
     "RLOCK_HEARTBEAT_FILE).\n"
     "Exit status: the command's own; 64 usage, 69 Redis unavailable, 75 busy (-E changes it), "
     "76 lock lost, 78 configuration, 79 hung (--heartbeat-file), 124 --max-run, 125 rlock "
     "failed, 126 not executable, 127 not found.",
     check_run,
     run_run},
    {"status",
     "one line per key: free, or held by whom",
     "KEY...",
     {k_status_args, k_connection},
     "Exit status: 0 every key held, 1 some key free, 69 Redis unreachable or a key that is "
     "not a lock; 64 usage, 78 configuration, 125 rlock failed.",
     nullptr,
     run_status},
    {"inspect",
     "everything known about one lock",
     "KEY",
     {k_key_json, k_connection},
     "Exit status: 0 held, 1 free, 69 Redis unreachable or not a lock; 64 usage, "
     "78 configuration, 125 rlock failed.",
     nullptr,
     [](const Invocation& in) { return inspect_verb(in.resolved.global, in.key(), in.line.json); }},
    {"history",
     "the latest runs of KEY, newest first",
     "KEY",
     {k_history_args, k_connection},
     "Exit status: 0, also when there is no history yet; 69 Redis unreachable; 64 usage, "
     "78 configuration, 125 rlock failed.",
     nullptr,
     [](const Invocation& in) {
       return history_verb(in.resolved.global, in.key(), in.line.count, in.line.json);
     }},
    {"check",
     "whether a run of KEY succeeded within PERIOD (a dead-man's switch)",
     "KEY --every PERIOD",
     {k_check_args, k_connection},
     "A duration is the last PERIOD by the Redis server's clock; hour, day, week and\n"
     "month are the current one, as --once-per counts them: check late in the period,\n"
     "or give a duration with slack (--every 25h for a daily job). Prints one line\n"
     "on stdout, the first word after the key 'ok' when a run succeeded (-q: only when\n"
     "none did). Reads only.\n"
     "Exit status: 0 a run succeeded within PERIOD, 1 none did (or none is recorded), "
     "69 Redis unreachable; 64 usage, 78 configuration, 125 rlock failed.",
     [](const CommandLine& line, const std::vector<std::string>&) { (void)every_period(line); },
     run_check},
    {"watch",
     "one line per change of the locks, until interrupted",
     "KEY...",
     {k_watch_args, k_connection},
     "Tells each change of the locks as it happens: taken (by whom), renewed late,\n"
     "released, expired, broken, waiters queued, places of a semaphore or shared lock.\n"
     "Keyspace notifications when the server sends them (notify-keyspace-events\n"
     "with K and g$xz, or KA; never changed by rlock), else polling every 250ms: the\n"
     "first line says which. Writes nothing to Redis. Ctrl-C or SIGTERM ends it.\n"
     "Exit status: 0 ended by a signal or by its reader going away (| head -1); 69 Redis "
     "unreachable at the start, or it refused us; 64 usage, 78 configuration, 125 rlock "
     "failed.",
     check_watch,
     [](const Invocation& in) {
       std::vector<std::string> keys;
       for (const auto& k : in.line.keys) keys.push_back(in.resolved.global.prefix + k);
       return watch_verb(in.resolved.global, keys, in.line.json);
     }},
    {"list",
     "every lock under the prefix that matches PATTERN",
     "[PATTERN]",
     {k_list_args, k_connection},
     "Exit status: 0, also when no lock matches; 69 Redis unreachable; 64 usage, "
     "78 configuration, 125 rlock failed.",
     nullptr,
     [](const Invocation& in) {
       return list_verb(in.resolved.global, in.line.pattern, in.line.json);
     }},
    {"acquire",
     "take the lock, print its token, exit",
     "KEY\nKEY --while-pid PID",
     {k_key, k_waiting, k_acquire_ttl, k_connection},
     "Prints only the token: t=$(rlock acquire KEY). Nothing renews the lock:\n"
     "run rlock extend before the ttl runs out, and rlock release at the end.\n"
     "Or hold it until the script exits: tok=$(rlock acquire --while-pid $$ KEY).\n"
     "Exit status: 0 acquired, 69 Redis unavailable, 75 busy (-E changes it); 64 usage, "
     "78 configuration, 125 rlock failed.",
     nullptr,
     run_acquire},
    {"extend",
     "renew a lock taken with acquire",
     "KEY --token T",
     {k_extend_args, k_connection},
     "Exit status: 0 extended, 1 not ours (nothing changed), 69 Redis unreachable; 64 usage, "
     "78 configuration, 125 rlock failed.",
     nullptr,
     [](const Invocation& in) {
       return extend_verb(in.resolved.global, in.key(), *in.line.token, in.resolved.run.ttl);
     }},
    {"release",
     "give a lock back, or break anyone's",
     "KEY --token T\nKEY --force [--token T | --all] [--now]",
     {k_release_args, k_connection},
     "--force leaves a tombstone: nobody takes the lock until its holder has surely\n"
     "stopped (its rlock notices at its next renewal and stops the command; cut off\n"
     "from Redis, at its lease's end). --now frees it at once: an overlap if it runs.\n"
     "Exit status: 0 released or broken, 1 not ours or free (nothing changed), 69 Redis "
     "unreachable or not a lock; 64 usage, 78 configuration, 125 rlock failed.",
     nullptr,
     [](const Invocation& in) {
       return release_verb(in.resolved.global, in.key(),
                           {in.line.token, in.line.force, in.line.now, in.line.all});
     }},
    {"reset-period",
     "let a --once-per job run again this period",
     "KEY --once-per PERIOD",
     {k_reset_period_args, k_connection},
     "Forgets this period's run of KEY (recorded in its history), so that the next\n"
     "rlock run --once-per runs the job. Give the --once-per and --tz of the job.\n"
     "Exit status: 0 forgotten, 1 no run this period or it is still running (nothing changed), "
     "69 Redis unreachable; 64 usage, 78 configuration, 125 rlock failed.",
     nullptr,
     [](const Invocation& in) {
       in.resolved.run.key = in.key();
       return reset_period_verb(in.resolved.global, in.resolved.run);
     }},
    {"config",
     "the effective configuration and where each value came from",
     "",
     {k_waiting, k_running, k_json, k_connection},
     "Exit status: 0; 64 usage (a bad flag or value), 78 configuration (a bad config file or "
     "URL), 125 rlock failed.",
     nullptr,
     [](const Invocation& in) {
       return config_verb(in.settings, in.resolved, in.config_file, in.line.json);
     }},
    {"help",
     "show the help of a command",
     "[COMMAND]",
     {},
     "Exit status: 0; 64 no such command.",
     nullptr,
     nullptr},
};

const Command* find_command(std::string_view name) {
  for (const Command& c : k_commands)
    if (c.name == name) return &c;
  return nullptr;
}

std::string command_list() {
  std::string out;
  for (const Command& c : k_commands) out += (out.empty() ? "" : ", ") + std::string(c.name);
  return out;
}

// Adds COMMAND's options to APP, in its order.
void add_options(CLI::App* app, CommandLine& line, const Command& command) {
  for (auto group : command.options) {
    for (const OptionRef& ref : group) {
      if (const SettingInfo* setting = find_setting(ref.name)) {
        add_setting(app, line, *setting, ref.help);
        continue;
      }
      for (const PlainOption& plain : k_plain_options)
        if (plain.name == ref.name) plain.add(app, line);
    }
  }
}

bool takes(const Command& command, std::string_view option) {
  for (auto group : command.options)
    for (const OptionRef& ref : group)
      if (ref.name == option) return true;
  return false;
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
void check_key(const std::string& key) {
  if (key.empty()) throw usage_error("KEY must not be empty");
  if (is_helper_key(key))
    throw usage_error("KEY '" + key + "' is named like one of rlock's own helper keys (" +
                      "':rlock:fence', ':rlock:queue' ...); choose another name");
}

// Help as rlock(1) shows it: "Commands", not CLI11's "Subcommands", and each command's usage
// with the arguments its table entry gives (CLI11 knows nothing of "-- COMMAND").
class HelpFormatter : public CLI::Formatter {
public:
  HelpFormatter() { column_width(34); }

  // NAME: "rlock", or "rlock run" for a command's help. (The list of commands is headed
  // "Commands" by their group: make_parser.)
  std::string make_usage(const CLI::App* app, std::string name) const override {
    const Command* command = app->get_parent() ? find_command(app->get_name()) : nullptr;
    if (!command) return "Usage: " + name + " COMMAND [OPTIONS] [ARGS...]\n";
    std::string out;
    std::string_view forms = command->usage;
    for (size_t start = 0; start <= forms.size();) {
      size_t end = std::min(forms.find('\n', start), forms.size());
      std::string_view form = forms.substr(start, end - start);
      out += (out.empty() ? "Usage: " : "   or: ") + name + " [OPTIONS]" +
             (form.empty() ? "" : " ") + std::string(form) + "\n";
      start = end + 1;
    }
    return out;
  }
};

// Which options a parser builds: only those the command line's words name (CommandLine::words),
// or all of them, for help and for the message about a command line CLI11 refused.
enum class Build { named, all };

// The command line as CLI11 parsed it: which command was given, with what.
struct Parsed {
  CLI::App app{"rlock: run a command on at most one host of a fleet at a time, holding a Redis "
               "lock while it runs",
               "rlock"};
  CommandLine line;
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
  app.formatter(std::make_shared<HelpFormatter>());
  app.footer("Each command's help ends with its exit statuses. See rlock(1).");
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
  for (const Command& command : k_commands) {
    bool is_help = command.name == "help";
    if (known && command.name != wanted && !(asking_help && is_help)) continue;
    CLI::App* sub = app.add_subcommand(std::string(command.name), command.summary);
    sub->group("Commands");
    if (is_help) sub->add_option("COMMAND", p->help_topic, "a command");
    if (command.name != wanted) continue;
    add_options(sub, p->line, command);
    if (command.footer) sub->footer(command.footer);
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

// Whether WORD ("--ttl", "--ttl=5s") is an option of some command: a setting, or a plain
// option (whose table names are the long flags, but for the arguments in capitals).
bool known_option(std::string_view word) {
  if (!word.starts_with("--")) return false;
  std::string_view name = word.substr(2, word.find('=') - 2);
  if (find_setting(name)) return true;
  for (const PlainOption& plain : k_plain_options)
    if (plain.name == name) return true;
  return false;
}

// Prints the help or version asked for, or throws the usage error for what CLI11 refused.
int report(const CLI::ParseError& e, Parsed& parser, const SplitArgs& args) {
  CLI::App& app = parser.app;
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
  else if (app.get_subcommands().empty() && dynamic_cast<const CLI::RequiredError*>(&e))
    message = "no command given (commands: " + command_list() + ")";
  if (dynamic_cast<const CLI::ExtrasError*>(&e) && !app.get_subcommands().empty()) {
    // CLI11 calls both an unknown flag and a command without '--' "not expected".
    std::vector<std::string> extras = app.get_subcommands().front()->remaining();
    std::string name = app.get_subcommands().front()->get_name();
    if (!extras.empty() && extras.front().rfind("-", 0) == 0)
      message =
          known_option(extras.front())
              ? "rlock " + name + " takes no " + extras.front().substr(0, extras.front().find('='))
              : "unknown option '" + extras.front() + "'";
    else if (name == "run")
      message += " (put '--' before the command: rlock run KEY -- COMMAND)";
  }
  throw usage_error(message + "; see '" + where + "'");
}

// rlock help [COMMAND].
int show_help(Parsed& parser) {
  CLI::App& app = parser.app;
  if (parser.help_topic.empty()) {
    // Not app.help(): that shows the help of the command given, here `help` itself.
    write_stdout(app.get_formatter()->make_help(&app, "rlock", CLI::AppFormatMode::Normal));
    return k_exit_ok;
  }
  CLI::App* topic = nullptr;
  try {
    topic = app.get_subcommand(parser.help_topic);
  } catch (const CLI::OptionNotFound&) {}
  if (!topic) throw usage_error("help: no command '" + parser.help_topic + "'");
  write_stdout(topic->help("rlock"));
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
  if (!args.command.empty() && command.name != "run")
    throw usage_error("'--' COMMAND is only for rlock run");
  if (!line.flock_only.empty()) throw usage_error(flock_only_message(line.flock_only));
  if (line.exclusive && line.flags.count("shared") && line.flags["shared"].values[0] == "true")
    throw usage_error("--exclusive excludes --shared");
  if (line.no_wait) {
    if (line.flags.count("wait")) throw usage_error("--no-wait excludes --wait");
    line.flags["wait"] = RawValue{{"0"}, {Origin::Kind::flag, "--no-wait"}};
  }
  // The keys and the command first: they are this invocation's, and the likelier mistake.
  for (const auto& key : line.keys) check_key(key);
  if (takes(command, "KEY")) check_key(line.key);
  if (command.check) command.check(line, args.command);

  std::optional<std::string> config_file;
  RawSettings settings = layered_settings(line, &config_file);
  Resolved resolved = resolve_settings(settings);
  set_verbosity(resolved.global.verbosity);
  set_log_format(resolved.global.log_format);
  return command.run(Invocation{line, args.command, settings, config_file, resolved});
}

}  // namespace

int run_command_line(int argc, char** argv) {
  return parse_and_run(split_at_double_dash(argc, argv));
}

}  // namespace rlock
