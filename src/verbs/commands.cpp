// The table of commands, in the order help lists them (ninja's tool table): each command's entry
// is in its own file, beside its code.
#include "verbs/command.h"

namespace rlock {

namespace {

constexpr const Command* k_commands[] = {
    // Run a job
    &k_run_command,
    // Look
    &k_status_command, &k_inspect_command, &k_list_command, &k_history_command, &k_logs_command,
    &k_watch_command, &k_check_command,
    // Act
    &k_stop_command, &k_pause_command, &k_resume_command, &k_reset_period_command,
    // Hold a lock in a script
    &k_acquire_command, &k_extend_command, &k_release_command,
    // Set up
    &k_doctor_command, &k_config_command, &k_completion_command, &k_help_command};

constexpr std::span<const Command* const> k_all(k_commands);
constexpr CommandSection k_sections[] = {{"Run a job", k_all.subspan(0, 1)},
                                         {"Look (read only)", k_all.subspan(1, 7)},
                                         {"Act on a lock or a job", k_all.subspan(8, 4)},
                                         {"Hold a lock in a script", k_all.subspan(12, 3)},
                                         {"Set up", k_all.subspan(15, 4)}};
static_assert(std::size(k_commands) == 19, "each command in one section of k_sections");

}  // namespace

// rlock help [COMMAND]: cli.cpp answers it (cli/help.h).
constexpr Command k_help_command = {"help", "show the help of a command",          "[COMMAND]",
                                    {},     "Exit status: 0; 64 no such command.", nullptr};

std::span<const Command* const> all_commands() { return k_commands; }

std::span<const CommandSection> command_sections() { return k_sections; }

const Command* find_command(std::string_view name) {
  for (const Command* c : k_commands)
    if (c->name == name) return c;
  return nullptr;
}

const SettingInfo* Option::setting_info() const {
  return into == Into::setting ? find_setting(setting) : nullptr;
}

const char* Option::flags() const {
  if (into != Into::setting) return names;
  const SettingInfo* info = setting_info();
  return info ? info->flags : nullptr;
}

bool Option::takes_value() const {
  switch (into) {
  case Into::setting: {
    const SettingInfo* info = setting_info();
    return info && info->kind != SettingKind::flag;
  }
  case Into::flag:
  case Into::no_wait:
  case Into::exclusive:
  case Into::flock_only: return false;
  default: return true;
  }
}

}  // namespace rlock
