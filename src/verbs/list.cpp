// rlock list [PATTERN]: every lock under the prefix, found with SCAN, printed as it is read.
#include <utility>

#include "lock/lock_state.h"
#include "print/print.h"
#include "util/text.h"
#include "verbs/command.h"
#include "verbs/verbs.h"

namespace rlock {

namespace {

// At most this many keys are offered to one TAB; a shell shows no more anyway.
constexpr size_t k_most_completions = 1000;
// A TAB waits on Redis this long at most, for connecting and for each command.
constexpr Millis k_completion_timeout{500};

// TEXT with the characters a Redis glob gives a meaning to (* ? [ ] \) taken literally.
std::string glob_literal(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

// list --complete WORD, for the shell completions (completion.cpp): the names of the locks
// (with --all, free ones with a history or a pause too) under the prefix that start with WORD
// (taken literally, not as a glob), one a line, without the prefix, so that the shell offers the
// key as the user types it. A name the line cannot carry as it is (a newline, a control or bidi
// character, bytes that are not UTF-8) is left out: the shell quotes what it offers, and it never
// runs, expands or splits it. A TAB must not hang nor ask: Redis is given half a second, and
// --password-command (which may prompt) is not run.
int complete_keys(GlobalOptions global, const std::string& word, bool all) {
  global.connect.password.command.reset();
  global.connect.connect_timeout = std::min(global.connect.connect_timeout, k_completion_timeout);
  global.connect.command_timeout = std::min(global.connect.command_timeout, k_completion_timeout);
  auto redis = connect_redis(global);
  auto found = find_locks(*redis, glob_literal(global.prefix + word) + "*", all);
  if (!found) return unavailable(found.failure());
  std::string out;
  size_t offered = 0;
  for (const FoundLock& f : found->locks) {
    if (!f.key.starts_with(global.prefix)) continue;
    std::string name = f.key.substr(global.prefix.size());
    // A backslash is no trouble for a line (the shell quotes it), only for a terminal.
    if (name.empty() || terminal_safe(name, std::string_view::npos, Backslashes::kept) != name)
      continue;
    out += name + "\n";
    if (++offered == k_most_completions) break;
  }
  write_stdout(out);
  return k_exit_ok;
}

}  // namespace

int list_verb(const GlobalOptions& global, const std::string& pattern, bool json, bool all,
              bool last_output) {
  auto redis = connect_redis(global);
  auto found = find_locks(*redis, global.prefix + pattern, all);
  if (!found) return unavailable(found.failure());
  found->last_output = last_output;
  LockPrinter printer(output_style(json));
  for (const FoundLock& f : found->locks) printer.fit(f.key);
  bool first = true;
  auto read = read_found_locks(*found, [&](const std::vector<LockState>& batch) {
    warn_wrong_types(batch);
    if (!batch.empty() && std::exchange(first, false)) warn_unanswered(batch);
    printer.print(batch);
  });
  // What was printed stands; the rest is missing (and the JSON document unfinished).
  if (!read) return unavailable(read.failure());
  printer.finish();
  return k_exit_ok;
}

namespace {

struct ListArgs : Arguments {
  std::string pattern = "*";
  bool json = false;
  bool all = false;
  bool last_output = false;
  bool complete = false;

  int run(const Invocation& in) override {
    if (complete) return complete_keys(in.resolved.global, pattern, all);
    return list_verb(in.resolved.global, pattern, json, all, last_output);
  }
};

constexpr Option k_options[] = {
    option<&ListArgs::pattern>("PATTERN", "a Redis glob after --prefix (default *)"),
    option<&ListArgs::json>("--json", k_json_help),
    option<&ListArgs::all>("--all",
                           "free locks too, those with a history (their last run) or a pause"),
    option<&ListArgs::last_output>("--last-output",
                                   "when each holder's command last printed (run --keep-output)"),
    option<&ListArgs::complete>("--complete", "names that start with PATTERN, for completions")
        .unlisted()};

}  // namespace

constexpr Command k_list_command = {
    "list",
    "every lock under the prefix that matches PATTERN",
    "[PATTERN] [--all] [--last-output]",
    {k_options, k_output, k_connection},
    "Examples:\n"
    "  rlock list 'lock:*'\n"
    "  rlock list --all --last-output\n"
    "Exit status: 0, also when no lock matches; 69 Redis unreachable; 64 usage, "
    "78 configuration, 125 rlock failed.",
    make_arguments<ListArgs>};

}  // namespace rlock
