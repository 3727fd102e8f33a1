// The table of commands, in the order help lists them (ninja's tool table): each command's entry
// is in its own file, beside its code.
#include "verbs/command.h"

namespace rlock {

namespace {

constexpr const Command* k_commands[] = {
    &k_run_command,     &k_status_command,     &k_inspect_command,      &k_history_command,
    &k_logs_command,    &k_check_command,      &k_watch_command,        &k_list_command,
    &k_acquire_command, &k_extend_command,     &k_release_command,      &k_stop_command,
    &k_pause_command,   &k_resume_command,     &k_reset_period_command, &k_config_command,
    &k_doctor_command,  &k_completion_command, &k_help_command};

}  // namespace

// rlock help [COMMAND]: cli.cpp answers it, from CLI11's help of the command.
constexpr Command k_help_command = {"help", "show the help of a command",          "[COMMAND]",
                                    {},     "Exit status: 0; 64 no such command.", nullptr};

std::span<const Command* const> all_commands() { return k_commands; }

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
