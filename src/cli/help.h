// The help texts, made from the commands' declarations (verbs/command.h) alone: `rlock --help`,
// `rlock COMMAND --help` and `rlock help COMMAND`. Within 80 columns, each option with its
// value's name, and its aliases said in words.
#pragma once

#include <string>

#include "verbs/command.h"

namespace rlock {

// rlock --help: the commands by what they are for, and where connection options go.
std::string overview_help();

// rlock COMMAND --help: its usage, its options under their headings, its footer (examples,
// then exit statuses).
std::string command_help(const Command& command);

// rlock help connection: the connection options every command takes, in full.
std::string connection_help();

// TEXT in lines of at most WIDTH columns, each after INDENT spaces but the first, which starts
// FIRST columns in. A line of TEXT that starts with a space is kept as it is (an example).
std::string wrap_text(std::string_view text, size_t width, size_t indent, size_t first);

}  // namespace rlock
