// What a command declares beside its code (verbs/<verb>.cpp): its name, help, usage, options and
// the function that runs it. Data only, so that the help, the parser (cli.cpp, the only file that
// knows CLI11), the options before the command (`rlock --redis URL status KEY`) and the shell
// completions (`rlock completion bash`) are all made from the same declarations.
//
// An option is a setting (settings.h, named by its long flag: its value joins the flags layer
// of the settings and is parsed there) or a field of the command's Arguments, whose type says
// what the option takes. Adding `--foo` to `status` is a field and an entry in status.cpp.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "settings/settings.h"

namespace rlock {

// Where an option's value goes.
enum class Into {
  setting,  // the flags layer of the settings (settings.h), by the setting's name
  // A field of the command's Arguments, by its type:
  flag,             // bool: given or not
  text,             // std::string
  optional_text,    // std::optional<std::string>
  texts,            // std::vector<std::string> (an argument given more than once: KEY...)
  number,           // int
  optional_number,  // std::optional<int>
  // The command line's own, acted on by cli.cpp for every command that declares them:
  config_file,  // --config FILE: the config file to read
  no_wait,      // -n: --wait 0, refused beside --wait
  exclusive,    // -x: flock's default, refused beside --shared
  flock_only,   // one of flock(1)'s options that mean nothing here: refused, saying why
};

struct Arguments;

// One option (or argument) of a command.
struct Option {
  // "-n,--count"; an argument's name in capitals ("KEY", "PATTERN"); nullptr for a setting,
  // whose flags are its own.
  const char* names = nullptr;
  const char* help = nullptr;  // nullptr: the setting's own
  Into into = Into::setting;
  const char* setting = nullptr;         // Into::setting: the setting's name (a test checks each)
  void* (*field)(Arguments&) = nullptr;  // a field of the command's Arguments
  const char* type_name = nullptr;       // the value in help ("N", "T"); a setting's is its own
  bool required = false;
  bool hidden = false;   // not in the help nor the completions (flock's refused options)
  int min = 0, max = 0;  // a number's range, when max > min

  constexpr Option must() const {
    Option o = *this;
    o.required = true;
    return o;
  }
  constexpr Option range(int lowest, int highest) const {
    Option o = *this;
    o.min = lowest;
    o.max = highest;
    return o;
  }
  constexpr Option unlisted() const {
    Option o = *this;
    o.hidden = true;
    return o;
  }
  // An argument (KEY), not an option (--json).
  constexpr bool positional() const { return names && names[0] != '-'; }
  // Whether it takes a value (--ttl D, -n N), not a flag (--json).
  bool takes_value() const;
  // "-n,--count", also for a setting ("-w,--wait,--timeout").
  const char* flags() const;
  // The setting it sets, or nullptr.
  const SettingInfo* setting_info() const;
};

// The setting NAME, with HELP in place of its own when given.
constexpr Option setting(const char* name, const char* help = nullptr) {
  return Option{.names = nullptr, .help = help, .into = Into::setting, .setting = name};
}

namespace detail {
template <class T> struct MemberOf;
template <class C, class T> struct MemberOf<T C::*> {
  using Class = C;
  using Type = T;
};
template <class T> constexpr Into into_for() {
  if constexpr (std::is_same_v<T, bool>)
    return Into::flag;
  else if constexpr (std::is_same_v<T, std::string>)
    return Into::text;
  else if constexpr (std::is_same_v<T, std::optional<std::string>>)
    return Into::optional_text;
  else if constexpr (std::is_same_v<T, std::vector<std::string>>)
    return Into::texts;
  else if constexpr (std::is_same_v<T, int>)
    return Into::number;
  else if constexpr (std::is_same_v<T, std::optional<int>>)
    return Into::optional_number;
  else
    static_assert(sizeof(T) == 0, "an option's field is bool, int, a string or their like");
}
}  // namespace detail

// The option NAMES ("--json", "KEY") that sets FIELD (&StatusArgs::json) of the command's
// Arguments; its type says what the option takes. TYPE_NAME is the value's name in help.
template <auto field>
constexpr Option option(const char* names, const char* help, const char* type_name = nullptr) {
  using M = detail::MemberOf<decltype(field)>;
  static_assert(std::is_base_of_v<Arguments, typename M::Class>);
  return Option{
      .names = names,
      .help = help,
      .into = detail::into_for<typename M::Type>(),
      .field = [](Arguments& a) -> void* { return &(static_cast<typename M::Class&>(a).*field); },
      .type_name = type_name};
}

// An option that cli.cpp acts on itself (Into::config_file ...).
constexpr Option driver_option(const char* names, Into into, const char* help,
                               const char* type_name = nullptr) {
  return Option{.names = names, .help = help, .into = into, .type_name = type_name};
}

// What a command runs with: the settings from every source, and what came after "--".
struct Invocation {
  const std::vector<std::string>& command;  // after "--" (rlock run)
  const RawSettings& settings;
  const std::optional<std::string>& config_file;
  Resolved& resolved;

  // KEY after --prefix.
  std::string key(const std::string& k) const { return resolved.global.prefix + k; }
  std::vector<std::string> keys(const std::vector<std::string>& ks) const {
    std::vector<std::string> out;
    for (const auto& k : ks) out.push_back(key(k));
    return out;
  }
};

// A command's arguments, as its options and arguments filled them in.
struct Arguments {
  virtual ~Arguments() = default;
  // What the command line alone can get wrong, checked before any setting is read: a usage
  // error. COMMAND is what came after "--".
  virtual void check(const std::vector<std::string>& command) const { (void)command; }
  // What an option's value alone can get wrong (check's --every), also checked when the parse
  // failed: a value that took the next word for its own leaves an argument missing.
  virtual void check_values() const {}
  // Runs the command; returns its exit status.
  virtual int run(const Invocation& in) = 0;
};

template <class A> std::unique_ptr<Arguments> make_arguments() { return std::make_unique<A>(); }

// Options under one heading of a command's help.
struct OptionGroup {
  const char* heading = nullptr;  // nullptr: "Options"
  std::span<const Option> options;

  constexpr OptionGroup() = default;
  template <size_t N> constexpr OptionGroup(const Option (&o)[N]) : options(o) {}
  constexpr OptionGroup(const char* h, std::span<const Option> o) : heading(h), options(o) {}
  constexpr auto begin() const { return options.begin(); }
  constexpr auto end() const { return options.end(); }
};

// A command: the table entry help, the parser and the completions are made from.
struct Command {
  std::string_view name;
  const char* summary;
  const char* usage;                   // what follows "rlock NAME [OPTIONS]"; one form a line
  std::array<OptionGroup, 7> options;  // in help's order
  // Ends with the command's exit statuses (test_docs.py checks them), after its examples.
  const char* footer;
  std::unique_ptr<Arguments> (*make)();  // nullptr: `help`, which cli.cpp answers itself
  bool takes_command = false;            // "-- COMMAND [ARG...]" (run)
  bool reads_settings = true;  // false: no config file nor environment is read (completion)
  // The long names of the options its help shows first, under "Most used" (run's: the few a
  // cron line needs); each is shown there only.
  std::span<const char* const> featured = {};
};

// An operator's --reason (stop, pause, resume, reset-period, release --force): at most 500
// bytes, for a status line and the history, not a report; a longer one is a usage error.
inline std::string reason_argument(const std::optional<std::string>& reason) {
  constexpr size_t most = 500;
  if (reason && reason->size() > most)
    throw usage_error("--reason: at most " + std::to_string(most) + " bytes");
  return reason.value_or("");
}

// Help texts several commands share.
inline constexpr const char* k_key_help = "the lock's Redis key (after --prefix)";
inline constexpr const char* k_keys_help = "lock keys (after --prefix)";
inline constexpr const char* k_json_help =
    "print one JSON document (its fields: man rlock-COMMAND)";

// Option groups that several commands take, in help's order.
// Where Redis is and how to reach it: every command that talks to Redis. They may also come
// before the command (rlock -u URL status KEY).
inline constexpr Option k_connection_options[] = {
    setting("redis"),
    setting("tls"),
    driver_option("--config", Into::config_file,
                  "config file (default $RLOCK_CONFIG, else ~/.config/rlock/config.toml, "
                  "where $XDG_CONFIG_HOME moves ~/.config, else /etc/rlock/config.toml)",
                  "FILE"),
    setting("prefix"),
    setting("password-file"),
    setting("password-command"),
    setting("cacert"),
    setting("cacertdir"),
    setting("cert"),
    setting("key"),
    setting("sni"),
    setting("connect-timeout"),
    setting("command-timeout")};
inline constexpr OptionGroup k_connection{"Connection, also before the command",
                                          k_connection_options};

// What rlock itself prints on stderr.
inline constexpr Option k_output_options[] = {setting("quiet"), setting("verbose"),
                                              setting("log-format")};
inline constexpr OptionGroup k_output{"Messages", k_output_options};

// How to wait for the lock, and what kind of lock it is. flock(1)'s spellings, so that
// `flock -xn FILE CMD` becomes `rlock run -xn KEY -- CMD`: -n/--nonblock/--nb, -w/--timeout,
// -E, -c and -s are the same options; -x is the default. What has no meaning for a lock in
// Redis is refused with what rlock offers instead (not -u: it is --redis here, as in redis-cli).
inline constexpr Option k_waiting_options[] = {
    driver_option("-n,--no-wait,--nonblock,--nb", Into::no_wait,
                  "fail at once when the lock is held: the default"),
    setting("wait"),
    setting("jitter"),
    setting("conflict-exit-code"),
    setting("shared"),
    driver_option("-x,-e,--exclusive", Into::exclusive,
                  "hold the lock alone, as flock -x: the default"),
    setting("limit"),
    setting("fair"),
    setting("min-replicas"),
    driver_option("-F,--no-fork", Into::flock_only, "").unlisted(),
    driver_option("-o,--close", Into::flock_only, "").unlisted(),
    driver_option("--unlock", Into::flock_only, "").unlisted(),
    driver_option("--fcntl", Into::flock_only, "").unlisted()};
inline constexpr OptionGroup k_waiting{"The lock, and waiting for it", k_waiting_options};

// The settings of `run` (also accepted by `config`, to show what a run would use).
inline constexpr Option k_process_options[] = {
    setting("ttl"),     setting("max-run"),   setting("kill-signal"),    setting("kill-after"),
    setting("on-lost"), setting("leftovers"), setting("heartbeat-file"), setting("stale-after"),
    setting("min-hold")};
inline constexpr OptionGroup k_process{"The lease and the command's process", k_process_options};

inline constexpr Option k_records_options[] = {
    setting("once-per"),     setting("retry-failed"),   setting("tz"),
    setting("record-skips"), setting("history-length"), setting("retention"),
    setting("keep-output"),  setting("metrics-file")};
inline constexpr OptionGroup k_records{"Once per period, the record and the output",
                                       k_records_options};

inline constexpr Option k_retries_options[] = {
    setting("retry"),     setting("retry-delay"),  setting("retry-on"),      setting("notify"),
    setting("notify-on"), setting("notify-after"), setting("notify-timeout")};
inline constexpr OptionGroup k_retries{"Retries and notifications", k_retries_options};

// Every command, in the order help lists them (verbs/commands.cpp).
std::span<const Command* const> all_commands();
// The same commands under the headings of rlock --help: what each is for.
struct CommandSection {
  const char* heading;
  std::span<const Command* const> commands;
};
std::span<const CommandSection> command_sections();
const Command* find_command(std::string_view name);

// Each command's entry, in its own file.
extern const Command k_run_command, k_status_command, k_inspect_command, k_history_command,
    k_logs_command, k_check_command, k_watch_command, k_list_command, k_acquire_command,
    k_extend_command, k_release_command, k_stop_command, k_pause_command, k_resume_command,
    k_reset_period_command, k_config_command, k_doctor_command, k_completion_command,
    k_help_command;

}  // namespace rlock
