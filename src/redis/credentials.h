// Where the Redis password comes from when the URL carries none: given once (RLOCK_PASSWORD,
// REDISCLI_AUTH, the config file), read from a file, or printed by a command. A file and a
// command are asked again for each new connection, so that credentials a sidecar rotates (a
// Vault agent's file, an IAM token that lives 15 minutes) are current whenever rlock connects:
// docs/REDIS.md "Managed Redis". What they yield is a secret: never shown, logged or stored.
#pragma once

#include <optional>
#include <string>

#include "util/duration.h"
#include "util/error.h"

namespace rlock {

struct PasswordSource {
  std::optional<std::string> password;  // given as is
  std::optional<std::string> file;      // --password-file: read for each connection
  std::optional<std::string> command;   // --password-command: run for each connection
};

// The password in PATH: the file's text less one trailing newline. A failure names the file.
Result<std::string> read_password_file(const std::string& path);

// Runs COMMAND with /bin/sh -c, without stdin, its stderr passed through; its first line of
// stdout is the password. One that fails, prints nothing or runs longer than TIMEOUT (killed,
// with what it started) is a failure that names the command's program (shell_command_summary()),
// never an assignment's value, an argument or its output.
Result<std::string> run_password_command(const std::string& command, Millis timeout);

// The password for a new connection, when SOURCE has one; TIMEOUT bounds a command.
Result<std::optional<std::string>> fetch_password(const PasswordSource& source, Millis timeout);

}  // namespace rlock
