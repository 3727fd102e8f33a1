// rlock config: the effective configuration, value by value, with where each came from.
#include "print/print.h"
#include "verbs/command.h"
#include "verbs/verbs.h"

namespace rlock {

int config_verb(const RawSettings& settings, const Resolved& resolved,
                const std::optional<std::string>& config_file, bool json) {
  // Settings whose default follows from others: shown as the value a run would use.
  RawSettings shown = settings;
  auto derived = [&](const char* name, std::string value, const char* rule) {
    if (!shown.count(name))
      shown[name] = RawValue{{std::move(value)}, {Origin::Kind::default_value, rule}};
  };
  derived("kill-after", format_duration(resolved.run.kill_after),
          "default (5s, or ttl/3 when shorter)");
  derived("tz", "UTC", "default");
  derived("min-replicas", std::to_string(resolved.run.min_replicas),
          "default (1 behind Sentinel, else 0)");
  print_config(shown, config_file, output_style(json));
  return k_exit_ok;
}

namespace {

struct ConfigArgs : Arguments {
  bool json = false;

  int run(const Invocation& in) override {
    return config_verb(in.settings, in.resolved, in.config_file, json);
  }
};

constexpr Option k_options[] = {option<&ConfigArgs::json>("--json", k_json_help)};

}  // namespace

constexpr Command k_config_command = {
    "config",
    "the effective configuration and where each value came from",
    "",
    {k_waiting, k_process, k_records, k_retries, k_options, k_output, k_connection},
    "Examples:\n"
    "  rlock config\n"
    "  rlock config --json -u redis://redis.internal:6379\n"
    "Exit status: 0; 64 usage (a bad flag or value), 78 configuration (a bad config file or "
    "URL), 125 rlock failed.",
    make_arguments<ConfigArgs>};

}  // namespace rlock
