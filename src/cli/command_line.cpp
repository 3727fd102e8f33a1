#include "cli/command_line.h"

#include <algorithm>
#include <cstring>

#include "redis/redis_url.h"

namespace rlock {

std::vector<std::string_view> names_of(std::string_view names) {
  std::vector<std::string_view> out;
  for (size_t start = 0; start < names.size();) {
    size_t comma = std::min(names.find(',', start), names.size());
    out.push_back(names.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

const Option* find_option(const Command& command, std::string_view name) {
  const Option* found = nullptr;
  for_each_option(command, [&](const Option& option) {
    if (const char* flags = option.flags(); flags && !option.positional())
      for (std::string_view n : names_of(flags))
        if (n == name) found = &option;
  });
  return found;
}

namespace {

// Whether WORD, an option typed before COMMAND, takes the next word as its value, as that
// command's declaration says: "--redis URL", "-u URL", "-qu URL", "-n 5" for history; not
// "--ttl=5s" nor "-w5". A word that is no option of COMMAND is taken for a flag here; the
// command's parser has the last word on it.
bool takes_next_word(const Command& command, std::string_view word) {
  if (word.starts_with("--")) {
    if (word.find('=') != std::string_view::npos) return false;
    const Option* option = find_option(command, word);
    return option && option->takes_value();
  }
  for (size_t i = 1; i < word.size(); ++i) {  // -qv, -u URL, -uURL
    const Option* option = find_option(command, std::string{'-', word[i]});
    if (!option) return false;
    if (option->takes_value()) return i + 1 == word.size();
  }
  return false;
}

// Whether WORDS[0, AT) are options of COMMAND (and their values), so that WORDS[AT] is the
// command itself.
bool options_before(const Command& command, const std::vector<std::string>& words, size_t at) {
  size_t i = 0;
  while (i < at) {
    if (words[i].size() < 2 || words[i][0] != '-') return false;
    i += takes_next_word(command, words[i]) ? 2 : 1;
  }
  return i == at;
}

// Whether WORD takes the next word as its value whatever the command (--redis URL, not -n:
// history's --count N, run's --no-wait).
bool always_takes_next_word(std::string_view word) {
  bool value = false, flag = false;
  for (const Command* command : all_commands()) {
    std::string_view first =
        word.starts_with("--") ? word.substr(0, word.find('=')) : word.substr(0, 2);
    if (!find_option(*command, first)) continue;
    (takes_next_word(*command, word) ? value : flag) = true;
  }
  return value && !flag;
}

// The words with the command first: options typed before it (rlock --redis URL status KEY,
// rlock -n 5 history KEY, as git and kubectl take them) move to just after it, in the order
// typed, where the command's parser reads them as its own: one meaning and one precedence
// wherever they are. The command is the first word that names one whose options the words
// before it are, as its declaration has them; failing that (a mistake), the first word that
// is neither an option nor the value of one, for the message.
std::vector<std::string> command_first(std::vector<std::string> words) {
  size_t at = 0;
  while (at < words.size() && words[at].size() > 1 && words[at][0] == '-') {
    if (words[at] == "--help" || words[at] == "-h" || words[at] == "--version") return words;
    at += always_takes_next_word(words[at]) ? 2 : 1;
  }
  if (at == 0 || at >= words.size()) return words;
  for (size_t i = 1; i < words.size(); ++i) {
    const Command* command = find_command(words[i]);
    if (command && options_before(*command, words, i)) {
      at = i;
      break;
    }
  }
  std::rotate(words.begin(), words.begin() + static_cast<std::ptrdiff_t>(at),
              words.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  return words;
}

}  // namespace

SplitArgs split_at_double_dash(int argc, char** argv) {
  SplitArgs out;
  int i = 1;
  for (; i < argc && std::strcmp(argv[i], "--") != 0; ++i) out.ours.emplace_back(argv[i]);
  for (++i; i < argc; ++i) out.command.emplace_back(argv[i]);
  out.ours = command_first(std::move(out.ours));
  return out;
}

void hide_url_passwords(int argc, char** argv) {
  for (int i = 1; i < argc && std::strcmp(argv[i], "--") != 0; ++i) {
    if (!std::strstr(argv[i], "://")) continue;
    std::string masked = masked_url_text(argv[i]);
    // The word's bytes past the shorter text are NULs: ps shows the word up to the first.
    size_t length = std::strlen(argv[i]);
    std::memcpy(argv[i], masked.data(), masked.size());
    std::memset(argv[i] + masked.size(), 0, length - masked.size());
  }
}

}  // namespace rlock
