// The command line's words before CLI11 sees them (cli.cpp): options typed before the command
// moved after it, and argv split at "--". Knows the commands' declarations, not CLI11.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "verbs/command.h"

namespace rlock {

// Calls F(option) for each option of COMMAND, in help's order.
template <class F> void for_each_option(const Command& command, F f) {
  for (auto group : command.options)
    for (const Option& option : group) f(option);
}

// The names of NAMES ("-n,--count"), one by one.
std::vector<std::string_view> names_of(std::string_view names);

// COMMAND's option called NAME ("--wait", "-w"), or nullptr.
const Option* find_option(const Command& command, std::string_view name);

// argv split at the first "--": CLI11 sees what comes before, the command is what comes after
// (exec'd as given, so its own flags never reach our parser).
struct SplitArgs {
  std::vector<std::string> ours;
  std::vector<std::string> command;
};

// ARGV split at its first "--", with the command first among its own words (command_first in
// command_line.cpp: rlock --redis URL status KEY is rlock status --redis URL KEY).
SplitArgs split_at_double_dash(int argc, char** argv);

// Overwrites each password in the URLs among rlock's own words (those before the first "--")
// with "***" (masked_url_text()), in ARGV itself, once they are read: ps and /proc/PID/cmdline
// show that memory for as long as rlock runs, and the keeper of acquire --while-pid (a fork)
// has the same. The rest of the word is shifted left and its last bytes made NUL, so that
// neither the password nor its length shows. The command's words are its own.
void hide_url_passwords(int argc, char** argv);

}  // namespace rlock
