// The command line: parses argv with CLI11 and calls the verb. The only file that knows CLI11.
#pragma once

namespace rlock {

// Returns the exit status. Usage errors are Error(k_exit_usage).
int run_command_line(int argc, char** argv);

}  // namespace rlock
