// The commands' declarations (verbs/*.cpp, command.h): every setting an option names exists,
// every other option has somewhere for its value to go, and no name is taken twice.
#include <doctest/doctest.h>
#include <set>
#include <string>

#include "verbs/command.h"

using namespace rlock;

TEST_CASE("every command's options are well declared") {
  CHECK(all_commands().size() >= 14);
  for (const Command* command : all_commands()) {
    CAPTURE(command->name);
    CHECK(find_command(command->name) == command);
    std::set<std::string> names;
    for (auto group : command->options)
      for (const Option& option : group) {
        CAPTURE(option.names ? option.names : option.setting);
        if (option.into == Into::setting) {
          // A mistyped setting would add nothing to the command.
          REQUIRE(option.setting_info() != nullptr);
          CHECK(option.setting_info()->flags != nullptr);
        } else {
          REQUIRE(option.names != nullptr);
          bool own = option.into == Into::config_file || option.into == Into::no_wait ||
                     option.into == Into::exclusive || option.into == Into::flock_only;
          CHECK((option.field != nullptr) != own);
        }
        CHECK(option.flags() != nullptr);
        std::string flags = option.flags();
        for (size_t start = 0; start < flags.size();) {
          size_t comma = std::min(flags.find(',', start), flags.size());
          std::string name = flags.substr(start, comma - start);
          start = comma + 1;
          CHECK_MESSAGE(names.insert(name).second, name, " twice");
        }
      }
  }
}

TEST_CASE("what takes a value follows the declaration") {
  const Command* history = find_command("history");
  const Command* run = find_command("run");
  REQUIRE(history);
  REQUIRE(run);
  auto named = [](const Command& command, const std::string& name) -> const Option* {
    for (auto group : command.options)
      for (const Option& option : group)
        if (option.flags() &&
            ("," + std::string(option.flags()) + ",").find("," + name + ",") != std::string::npos)
          return &option;
    return nullptr;
  };
  REQUIRE(named(*history, "-n"));
  CHECK(named(*history, "-n")->takes_value());
  REQUIRE(named(*run, "-n"));
  CHECK_FALSE(named(*run, "-n")->takes_value());
  CHECK(named(*run, "-c")->takes_value());
  CHECK(named(*run, "--timeout")->takes_value());  // a setting: -w,--wait,--timeout
  CHECK_FALSE(named(*run, "--fair")->takes_value());
}
