// rlock completion bash|zsh|fish: the shell's completion for rlock, made from the commands'
// declarations (command.h), as kubectl and gh print theirs. The build installs what it prints
// (completions/CMakeLists.txt), so a new option is completed without another file to edit.
#include <algorithm>
#include <map>
#include <set>

#include "print/print.h"
#include "util/error.h"
#include "verbs/command.h"

namespace rlock {

namespace {

// What completes an option's value or an argument.
struct Hint {
  enum class Kind { none, words, files, directories, pids, zones, keys, commands } kind;
  std::string words;  // Kind::words: the candidates, space-separated
};

Hint hint_for_value(const Option& option) {
  using K = Hint::Kind;
  std::string type = option.type_name ? option.type_name : "";
  const SettingInfo* setting = option.setting_info();
  if (setting && setting->type_name) type = setting->type_name;
  if (type.find('|') != std::string::npos) {
    std::replace(type.begin(), type.end(), '|', ' ');
    return {K::words, type};
  }
  if (type == "FILE" || type == "PATH") return {K::files, ""};
  if (type == "DIR") return {K::directories, ""};
  if (type == "PID") return {K::pids, ""};
  if (type == "ZONE") return {K::zones, ""};
  if (type == "SIG") return {K::words, "TERM INT HUP QUIT KILL USR1 USR2"};
  if (type == "URL")
    return {K::words, "redis:// rediss:// unix:// redis-sentinel:// rediss-sentinel://"};
  if (type == "PERIOD") return {K::words, "hour day week month 1h 1d"};
  if (setting && setting->kind == SettingKind::size) return {K::words, "64k 256k 1M 4M 16M"};
  if (setting && std::string_view(setting->name) == "retention")
    return {K::words, "7d 30d 90d 365d inf"};
  if (setting && setting->kind == SettingKind::wait) return {K::words, "inf 10s 1m 10m 1d 30d"};
  return {K::none, ""};
}

// A KEY: the locks held now for the commands that act on a holder (Hint::words empty), else
// also the free ones with a history or a pause (words: the option that asks list for them).
Hint hint_for_argument(const Command& command, const Option& argument) {
  std::string_view name = argument.names;
  if (name == "PATTERN") return {Hint::Kind::keys, ""};
  if (name == "KEY") {
    for (std::string_view held : {"status", "stop", "release", "extend"})
      if (command.name == held) return {Hint::Kind::keys, ""};
    return {Hint::Kind::keys, "--all"};
  }
  if (name == "SHELL") return {Hint::Kind::words, "bash zsh fish"};
  return {Hint::Kind::none, ""};
}

// One option as the completions see it.
struct Flag {
  std::vector<std::string> names;  // "-n", "--count"
  bool value = false;
  std::string help;  // short: up to the first parenthesis or semicolon
  Hint hint;
};

std::vector<std::string> split(std::string_view text, char by) {
  std::vector<std::string> out;
  for (size_t start = 0; start <= text.size();) {
    size_t end = std::min(text.find(by, start), text.size());
    if (end > start) out.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// HELP in a few words for a menu: without what it says in parentheses (so that --notify and
// --password-command do not both read "run CMD"), up to its first ';'.
std::string short_help(std::string help) {
  for (size_t open; (open = help.find(" (")) != std::string::npos;) {
    size_t depth = 0, close = open + 1;
    for (; close < help.size(); ++close) {
      if (help[close] == '(') ++depth;
      if (help[close] == ')' && --depth == 0) break;
    }
    help.erase(open, close + 1 - open);
  }
  for (const char* end : {"; ", ": redis://"})
    if (size_t at = help.find(end); at != std::string::npos) help.resize(at);
  if (help.size() > 70) help = help.substr(0, help.rfind(' ', 67)) + "...";
  return help;
}

std::vector<Flag> flags_of(const Command& command) {
  std::vector<Flag> out;
  for (auto group : command.options)
    for (const Option& option : group) {
      if (option.positional() || option.hidden || !option.flags()) continue;
      const SettingInfo* setting = option.setting_info();
      const char* help = option.help ? option.help : setting ? setting->help : "";
      out.push_back({split(option.flags(), ','), option.takes_value(), short_help(help),
                     option.takes_value() ? hint_for_value(option) : Hint{}});
    }
  return out;
}

std::vector<const Option*> arguments_of(const Command& command) {
  std::vector<const Option*> out;
  for (auto group : command.options)
    for (const Option& option : group)
      if (option.positional()) out.push_back(&option);
  return out;
}

std::string join(const std::vector<std::string>& words, const char* by = " ") {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : by) + w;
  return out;
}

// TEXT inside single quotes.
std::string quoted(std::string_view text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::vector<std::string> verb_names() {
  std::vector<std::string> out;
  for (const Command* c : all_commands()) out.emplace_back(c->name);
  return out;
}

// What rlock help takes: a command, or connection (rlock help connection).
std::string help_topics() { return join(verb_names()) + " connection"; }

// Options that mean the same before any command: a flag everywhere, or a value everywhere.
std::vector<Flag> options_before_any_command() {
  std::map<std::string, Flag> by_name;
  std::set<std::string> ambiguous;
  for (const Command* c : all_commands())
    for (const Flag& f : flags_of(*c))
      for (const std::string& n : f.names) {
        auto [it, added] = by_name.emplace(n, f);
        if (!added && it->second.value != f.value) ambiguous.insert(n);
      }
  std::vector<Flag> out;
  std::set<std::string> seen;
  for (const Command* c : all_commands())
    for (const Flag& f : flags_of(*c)) {
      Flag kept = f;
      kept.names.clear();
      for (const std::string& n : f.names)
        if (!ambiguous.count(n) && seen.insert(n).second) kept.names.push_back(n);
      if (!kept.names.empty()) out.push_back(kept);
    }
  return out;
}

// How the completions ask rlock for keys: `rlock list --complete WORD` (list.cpp), bounded
// again from outside in case connecting hangs where rlock's own timeouts cannot reach.
constexpr const char* k_keys_from_list = "timeout 1 rlock list";

// The options that say where Redis is and how to reach it (k_connection): the completions pass
// those typed on the line on to `rlock list --complete`, so that TAB asks the Redis the
// command will use, under the same prefix.
std::vector<Flag> connection_flags() {
  Command list = *find_command("list");
  list.options = {k_connection};
  return flags_of(list);
}

std::vector<std::string> connection_names(bool valued) {
  std::vector<std::string> out;
  for (const Flag& f : connection_flags())
    if (f.value == valued) out.insert(out.end(), f.names.begin(), f.names.end());
  return out;
}

std::string bash_value_action(const Hint& hint) {
  switch (hint.kind) {
  case Hint::Kind::words: return "COMPREPLY=($(compgen -W \"" + hint.words + "\" -- \"$cur\"))";
  case Hint::Kind::files: return "_filedir";
  case Hint::Kind::directories: return "_filedir -d";
  case Hint::Kind::pids: return "_pids";
  case Hint::Kind::zones:  // not zone.tab, posixrules, posix/ ...: zones start with a capital
    return "COMPREPLY=($(cd /usr/share/zoneinfo 2>/dev/null && compgen -f -X '[[:lower:]]*' -- "
           "\"$cur\"))";
  case Hint::Kind::keys: return "_rlock_keys" + (hint.words.empty() ? "" : " " + hint.words);
  case Hint::Kind::commands: return "COMPREPLY=($(compgen -c -- \"$cur\"))";
  case Hint::Kind::none: break;
  }
  return ":";
}

// The bash functions that complete a key: the words of the line that say where Redis is,
// dequoted, passed to `rlock list --complete`; each name it prints quoted for the line.
std::string bash_keys() {
  return "# A word of the line as the command will get it, in REPLY: without the quotes or the\n"
         "# backslashes typed around it, ~/ for $HOME. Nothing in it is expanded or run.\n"
         "_rlock_dequote() {\n"
         "    REPLY=$1\n"
         "    case $REPLY in\n"
         "    \\'*) REPLY=${REPLY#\\'} REPLY=${REPLY%\\'} ;;\n"
         "    \\\"*) REPLY=${REPLY#\\\"} REPLY=${REPLY%\\\"} ;;\n"
         "    *) REPLY=${REPLY//\\\\\\\\/$'\\1'} REPLY=${REPLY//\\\\/} REPLY=${REPLY//$'\\1'/\\\\} "
         ";;\n"
         "    esac\n"
         "    [[ $REPLY == \\~/* ]] && REPLY=$HOME/${REPLY#\\~/}\n"
         "}\n\n"
         "# Lock keys from `rlock list --complete` (rlock's locks, and other programs' that start "
         "with\n"
         "# what is typed), asked of the Redis and prefix the options on the line name, when it\n"
         "# answers within a second. rlock prints one name a line; each is quoted for the line\n"
         "# (printf %q), never expanded, run or split. After an opening quote readline inserts "
         "the\n"
         "# name as it is, so a name the quote cannot hold is left out.\n"
         "_rlock_keys() {\n"
         "    local -a connection=()\n"
         "    local i key word\n"
         "    for ((i = 1; i < cword; i++)); do\n"
         "        case ${words[i]} in\n"
         "        --) break ;;\n"
         "        --*=*)\n"
         "            _rlock_dequote \"${words[i]#*=}\"\n"
         "            case ${words[i]%%=*} in\n"
         "            " +
         join(connection_names(true), " | ") +
         ") connection+=(\"${words[i]%%=*}=$REPLY\") ;;\n"
         "            esac ;;\n"
         "        " +
         join(connection_names(true), " | ") +
         ")\n"
         "            _rlock_dequote \"${words[i + 1]}\"\n"
         "            connection+=(\"${words[i]}\" \"$REPLY\")\n"
         "            ((i++)) ;;\n"
         "        " +
         join(connection_names(false), " | ") +
         ") connection+=(\"${words[i]}\") ;;\n"
         "        esac\n"
         "    done\n"
         "    _rlock_dequote \"$cur\"\n"
         "    word=$REPLY\n"
         "    COMPREPLY=()\n"
         "    while IFS= read -r key; do\n"
         "        case $cur in\n"
         "        \\'*) [[ $key == *\\'* ]] && continue ;;\n"
         "        \\\"*) [[ $key == *[\\\"\\$\\`\\\\!]* ]] && continue ;;\n"
         "        *) printf -v key %q \"$key\" ;;\n"
         "        esac\n"
         "        COMPREPLY+=(\"$key\")\n"
         "    done < <(" +
         std::string(k_keys_from_list) +
         " \"${connection[@]}\" \"$@\" --complete \"$word\" 2>/dev/null)\n"
         "}\n\n";
}

std::string bash() {
  std::string out =
      "# bash completion for rlock(1), printed by `rlock completion bash` from the commands'\n"
      "# declarations (src/verbs/*.cpp): regenerate it, never edit it.   -*- shell-script -*-\n"
      "\n" +
      bash_keys() +
      "# Whether words[1..$2) are options of the command $1 and their values: then words[$2] is\n"
      "# the command (rlock -n 5 history KEY: -n takes a value for history, not for run).\n"
      "_rlock_before() {\n"
      "    local valued=\" ${_rlock_valued[$1]} \" j=1\n"
      "    while ((j < $2)); do\n"
      "        [[ ${words[j]} == -?* ]] || return 1\n"
      "        if [[ $valued == *\" ${words[j]} \"* ]]; then ((j += 2)); else ((j++)); fi\n"
      "    done\n"
      "    ((j == $2))\n"
      "}\n\n"
      "# COMPREPLY for the line in cur, prev, words and cword.\n"
      "_rlock_reply() {\n";
  out += "    local verbs=\"" + join(verb_names()) + "\"\n";
  // Per command: its options, those that take a value, and what completes its arguments.
  out += "    local -A _rlock_options=(\n";
  for (const Command* c : all_commands()) {
    std::vector<std::string> names;
    for (const Flag& f : flags_of(*c)) names.insert(names.end(), f.names.begin(), f.names.end());
    out += "        [" + std::string(c->name) + "]=\"" + join(names) + "\"\n";
  }
  out += "    )\n    local -A _rlock_valued=(\n";
  std::map<std::string, Hint> hints;  // by option name: the same in every command
  for (const Command* c : all_commands()) {
    std::vector<std::string> names;
    for (const Flag& f : flags_of(*c))
      if (f.value)
        for (const std::string& n : f.names) {
          names.push_back(n);
          hints.emplace(n, f.hint);
        }
    out += "        [" + std::string(c->name) + "]=\"" + join(names) + "\"\n";
  }
  out += "    )\n";
  std::vector<std::string> before;
  for (const Flag& f : options_before_any_command())
    before.insert(before.end(), f.names.begin(), f.names.end());
  out +=
      "    local before=\"" + join(before) +
      "\"\n\n"
      "    # The command is the first word that names one whose options the words before it are\n"
      "    # (options every command takes may come before it: rlock --redis URL status KEY).\n"
      "    local i verb=\"\" dashdash=0\n"
      "    for ((i = 1; i < cword; i++)); do\n"
      "        if [[ ${words[i]} == -- ]]; then\n"
      "            dashdash=$i\n"
      "            break\n"
      "        fi\n"
      "        if [[ -z $verb && \" $verbs \" == *\" ${words[i]} \"* ]] && _rlock_before "
      "\"${words[i]}\" $i; then\n"
      "            verb=${words[i]}\n"
      "        fi\n"
      "    done\n\n"
      "    # After \"--\" comes the command and its own arguments.\n"
      "    if ((dashdash > 0)); then\n"
      "        _command_offset $((dashdash + 1))\n"
      "        return\n"
      "    fi\n\n"
      "    # The value of an option, also after '=' (--on-lost=k): readline replaces what follows\n"
      "    # the '=', so the replies are values alone.\n"
      "    if [[ $cur == --*=* ]]; then\n"
      "        prev=${cur%%=*}\n"
      "        cur=${cur#*=}\n"
      "    fi\n"
      "    local valued=\" ${_rlock_valued[*]} \"\n"
      "    [[ -n $verb ]] && valued=\" ${_rlock_valued[$verb]} \"\n"
      "    if [[ $valued == *\" $prev \"* ]]; then\n"
      "        case $prev in\n";
  std::map<std::string, std::vector<std::string>> by_action;
  for (const auto& [name, hint] : hints) by_action[bash_value_action(hint)].push_back(name);
  for (const auto& [action, names] : by_action)
    out += "            " + join(names, " | ") + ")\n                " + action +
           "\n                ;;\n";
  out += "        esac\n"
         "        return\n"
         "    fi\n\n"
         "    if [[ -z $verb ]]; then\n"
         "        if [[ $cur == -* ]]; then\n"
         "            COMPREPLY=($(compgen -W \"$before -h --help --version\" -- \"$cur\"))\n"
         "        else\n"
         "            COMPREPLY=($(compgen -W \"$verbs\" -- \"$cur\"))\n"
         "        fi\n"
         "        return\n"
         "    fi\n\n"
         "    if [[ $cur == -* ]]; then\n"
         "        COMPREPLY=($(compgen -W \"${_rlock_options[$verb]} -h --help\" -- \"$cur\"))\n"
         "        return\n"
         "    fi\n"
         "    case $verb in\n";
  for (const Command* c : all_commands()) {
    std::string action;
    if (c->name == "help")
      action = "COMPREPLY=($(compgen -W \"" + help_topics() + "\" -- \"$cur\"))";
    for (const Option* a : arguments_of(*c))
      if (Hint h = hint_for_argument(*c, *a); h.kind != Hint::Kind::none) {
        action = bash_value_action(h);
        break;
      }
    if (!action.empty())
      out += "        " + std::string(c->name) + ")\n            " + action + "\n            ;;\n";
  }
  out += "    esac\n}\n\n"
         "# ':' and '=' stay in the word (lock:daily, redis://h, --redis=URL); readline replaces\n"
         "# only what follows the last ':' (but inside quotes), so that much of each reply goes.\n"
         "_rlock() {\n"
         "    local cur prev words cword\n"
         "    _init_completion -n =: || return\n"
         "    _rlock_reply\n"
         "    [[ $cur == [\\'\\\"]* ]] || __ltrim_colon_completions \"$cur\"\n"
         "} &&\n"
         "    complete -F _rlock rlock\n";
  return out;
}

// zsh's _arguments: a description in [...] and the spec in single quotes.
std::string zsh_description(const std::string& help) {
  std::string out;
  for (char c : help) {
    if (c == '[' || c == ']' || c == ':' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string zsh_action(const Hint& hint, const std::string& what) {
  switch (hint.kind) {
  case Hint::Kind::words: return ":" + what + ":(" + hint.words + ")";
  case Hint::Kind::files: return ":" + what + ":_files";
  case Hint::Kind::directories: return ":" + what + ":_directories";
  case Hint::Kind::pids: return ":" + what + ":_pids";
  case Hint::Kind::zones: return ":" + what + ":_time_zone";
  case Hint::Kind::keys:
    return ":" + what + ":_rlock_keys" + (hint.words.empty() ? "" : " " + hint.words);
  case Hint::Kind::commands: return ":" + what + ":_command_names";
  case Hint::Kind::none: break;
  }
  return ":" + what + ": ";
}

std::string zsh_specs(const std::vector<Flag>& flags, const char* indent) {
  std::string out;
  for (const Flag& f : flags) {
    std::string group = f.names.size() > 1 ? "(" + join(f.names) + ")" : "";
    for (const std::string& n : f.names) {
      std::string spec = group + n;
      if (f.value) spec += n.starts_with("--") ? "=" : "+";
      spec += "[" + zsh_description(f.help) + "]";
      if (f.value) spec += zsh_action(f.hint, "value");
      out += std::string(indent) + quoted(spec) + " \\\n";
    }
  }
  return out;
}

std::string zsh() {
  std::string out =
      "#compdef rlock\n"
      "# zsh completion for rlock(1), printed by `rlock completion zsh` from the commands'\n"
      "# declarations (src/verbs/*.cpp): regenerate it, never edit it.\n\n"
      "# Lock keys from `rlock list --complete` (rlock's locks, and other programs' that start "
      "with\n"
      "# what is typed), asked of the Redis and prefix the options on the line name (the line as\n"
      "# _rlock saw it, before _arguments cut it at the command), when it answers within a\n"
      "# second. One name a line; compadd quotes each; nothing in them is expanded or run.\n"
      "# --all (also free keys with a history or a pause) when given: _arguments adds compadd's\n"
      "# options to the words of the action, which rlock list must not see.\n"
      "_rlock_keys() {\n"
      "  local -a keys connection all\n"
      "  local i\n"
      "  (($@[(I)--all])) && all=(--all)\n"
      "  for ((i = 2; i < _rlock_current; i++)); do\n"
      "    case $_rlock_line[i] in\n"
      "      (--) break ;;\n"
      "      (--*=*)\n"
      "        case ${_rlock_line[i]%%=*} in\n"
      "          (" +
      join(connection_names(true), "|") +
      ") connection+=(\"${_rlock_line[i]%%=*}=${(Q)${_rlock_line[i]#*=}}\") ;;\n"
      "        esac ;;\n"
      "      (" +
      join(connection_names(true), "|") +
      ")\n"
      "        connection+=(\"$_rlock_line[i]\" \"${(Q)_rlock_line[i+1]}\")\n"
      "        ((i++)) ;;\n"
      "      (" +
      join(connection_names(false), "|") +
      ") connection+=(\"$_rlock_line[i]\") ;;\n"
      "    esac\n"
      "  done\n"
      "  keys=(${(f)\"$(" +
      std::string(k_keys_from_list) +
      " \"${connection[@]}\" \"${all[@]}\" --complete \"${(Q)PREFIX}\" 2>/dev/null)\"})\n"
      "  compadd -a keys\n"
      "}\n\n";
  for (const Command* c : all_commands()) {
    std::string fn = std::string(c->name);
    std::replace(fn.begin(), fn.end(), '-', '_');
    out += "_rlock_" + fn + "() {\n  _arguments -s" + (c->takes_command ? " -S" : "") + " \\\n";
    out += zsh_specs(flags_of(*c), "    ");
    out += "    '(-)'{-h,--help}'[show help]' \\\n";
    int n = 0;
    for (const Option* a : arguments_of(*c)) {
      std::string name = a->names;
      std::string lower = name;
      std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
      Hint h = hint_for_argument(*c, *a);
      bool many = a->into == Into::texts;
      out += "    " +
             quoted((many ? std::string("*") : std::to_string(++n)) + zsh_action(h, lower)) +
             " \\\n";
    }
    if (c->name == "help") out += "    '1:command:(" + help_topics() + ")' \\\n";
    if (c->takes_command) out += "    '*::command:_normal' \\\n";
    out.resize(out.size() - 3);  // the last " \\\n"
    out += "\n}\n\n";
  }
  out += "_rlock() {\n"
         "  local curcontext=\"$curcontext\" state line\n"
         "  local -a _rlock_line=(\"${words[@]}\")\n"
         "  local _rlock_current=$CURRENT\n"
         "  _arguments -C \\\n";
  out += zsh_specs(options_before_any_command(), "    ");
  out += "    '(-)--version[print version]' \\\n"
         "    '(-)'{-h,--help}'[show help]' \\\n"
         "    ";
  std::vector<std::string> described;
  for (const Command* c : all_commands())
    described.push_back(std::string(c->name) + "\\:\"" + c->summary + "\"");
  out += quoted("1:command:((" + join(described) + "))") + " \\\n    '*::arg:->args'\n"
                                                           "  case $state in\n"
                                                           "    args)\n"
                                                           "      case $words[1] in\n";
  for (const Command* c : all_commands()) {
    std::string fn = std::string(c->name);
    std::replace(fn.begin(), fn.end(), '-', '_');
    out += "        " + std::string(c->name) + ") _rlock_" + fn + " ;;\n";
  }
  out += "      esac\n"
         "      ;;\n"
         "  esac\n"
         "}\n\n"
         "_rlock \"$@\"\n";
  return out;
}

std::string fish_value(const Hint& hint) {
  switch (hint.kind) {
  case Hint::Kind::words: return " -x -a " + quoted(hint.words);
  case Hint::Kind::files: return " -r -F";
  case Hint::Kind::directories: return " -x -a '(__fish_complete_directories)'";
  case Hint::Kind::pids: return " -x -a '(__fish_complete_pids)'";
  case Hint::Kind::zones: return " -x";
  case Hint::Kind::keys:
    return " -x -a '(__rlock_keys" + (hint.words.empty() ? "" : " " + hint.words) + ")'";
  case Hint::Kind::commands: return " -x -a '(__fish_complete_command)'";
  case Hint::Kind::none: break;
  }
  return " -x";
}

std::string fish_options(const std::vector<Flag>& flags, const std::string& condition) {
  std::string out;
  for (const Flag& f : flags) {
    std::string line = "complete -c rlock -n " + quoted(condition);
    for (const std::string& n : f.names)
      line += n.starts_with("--") ? " -l " + n.substr(2) : " -s " + n.substr(1);
    if (f.value) line += fish_value(f.hint);
    out += line + " -d " + quoted(f.help) + "\n";
  }
  return out;
}

std::string fish() {
  std::string verbs = join(verb_names());
  std::string out =
      "# fish completion for rlock(1), printed by `rlock completion fish` from the commands'\n"
      "# declarations (src/verbs/*.cpp): regenerate it, never edit it.\n\n"
      "function __rlock_no_verb\n"
      "    not __fish_seen_subcommand_from " +
      verbs +
      "\n"
      "end\n\n"
      "# Lock keys from `rlock list --complete` (rlock's locks, and other programs' that start "
      "with\n"
      "# what is typed), asked of the Redis and prefix the options on the line name, when it\n"
      "# answers within a second. One name a line; fish escapes each; nothing is expanded or run.\n"
      "function __rlock_keys\n"
      "    set -l words (commandline -opc)\n"
      "    set -l connection\n"
      "    set -l i 2\n"
      "    while test $i -le (count $words)\n"
      "        switch $words[$i]\n"
      "            case --\n"
      "                break\n"
      "            case " +
      join(connection_names(true), " ") +
      "\n"
      "                set i (math $i + 1)\n"
      "                set -a connection $words[(math $i - 1)] $words[$i]\n"
      "            case " +
      join(connection_names(false), " ") +
      "\n"
      "                set -a connection $words[$i]\n"
      "            case '--*=*'\n"
      "                contains -- (string split -m1 = -- $words[$i])[1] " +
      join(connection_names(true), " ") +
      "\n"
      "                and set -a connection $words[$i]\n"
      "        end\n"
      "        set i (math $i + 1)\n"
      "    end\n"
      "    set -l word (commandline -ct | string unescape 2>/dev/null; or commandline -ct)\n"
      "    " +
      std::string(k_keys_from_list) +
      " $connection $argv --complete \"$word\" 2>/dev/null\n"
      "end\n\n"
      "complete -c rlock -f\n";
  for (const Command* c : all_commands())
    out += "complete -c rlock -n __rlock_no_verb -a " + std::string(c->name) + " -d " +
           quoted(c->summary) + "\n";
  out += "complete -c rlock -n __rlock_no_verb -l version -d 'print version'\n"
         "complete -c rlock -s h -l help -d 'show help'\n\n"
         "# Options before the command\n";
  out += fish_options(options_before_any_command(), "__rlock_no_verb");
  for (const Command* c : all_commands()) {
    std::string condition = "__fish_seen_subcommand_from " + std::string(c->name);
    out += "\n# rlock " + std::string(c->name) + "\n";
    out += fish_options(flags_of(*c), condition);
    if (c->name == "help")
      out += "complete -c rlock -n " + quoted(condition) + " -a " + quoted(help_topics()) + "\n";
    for (const Option* a : arguments_of(*c)) {
      Hint h = hint_for_argument(*c, *a);
      if (h.kind == Hint::Kind::keys)
        out += "complete -c rlock -n " + quoted(condition) + " -a '(__rlock_keys" +
               (h.words.empty() ? "" : " " + h.words) + ")'\n";
      else if (h.kind == Hint::Kind::words)
        out += "complete -c rlock -n " + quoted(condition) + " -a " + quoted(h.words) + "\n";
    }
  }
  return out;
}

struct CompletionArgs : Arguments {
  std::string shell;

  void check(const std::vector<std::string>&) const override {
    if (shell != "bash" && shell != "zsh" && shell != "fish")
      throw usage_error("completion: no shell '" + shell + "' (bash, zsh or fish)");
  }

  int run(const Invocation&) override {
    write_stdout(shell == "bash" ? bash() : shell == "zsh" ? zsh() : fish());
    return k_exit_ok;
  }
};

constexpr Option k_options[] = {
    option<&CompletionArgs::shell>("SHELL", "bash, zsh or fish").must()};

}  // namespace

constexpr Command k_completion_command = {
    "completion",
    "print the shell completion for rlock (bash, zsh or fish)",
    "SHELL",
    {k_options},
    "source <(rlock completion bash) in ~/.bashrc; the package installs all three.\n"
    "Examples:\n"
    "  source <(rlock completion bash)\n"
    "Exit status: 0; 64 no such shell.",
    make_arguments<CompletionArgs>,
    /*takes_command=*/false,
    /*reads_settings=*/false};

}  // namespace rlock
