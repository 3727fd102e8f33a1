// How a server's error reply reads in rlock's messages: its code, a hint for the errors
// operators meet, and what an ACL denied, named in each server's wording, for one command or
// for a script. Also the words for a reply of a shape rlock did not expect.
#include <algorithm>
#include <cctype>
#include <charconv>

#include "redis/redis.h"

namespace rlock {

std::string error_code(std::string_view error) {
  std::string_view code = error.substr(0, error.find(' '));
  if (code != "ERR" || error.find("Error running script") == std::string_view::npos)
    return std::string(code);
  // Redis 6.x wraps an error that a command inside a script returned: "ERR Error running
  // script (call to f_...): @user_script: 86: -READONLY You can't write against a read only
  // replica." The code is the word after " -".
  for (size_t at = error.find(" -"); at != std::string_view::npos; at = error.find(" -", at + 1)) {
    size_t start = at + 2, end = start;
    while (end < error.size() && error[end] >= 'A' && error[end] <= 'Z') ++end;
    if (end - start >= 2 && (end == error.size() || error[end] == ' '))
      return std::string(error.substr(start, end - start));
  }
  return std::string(code);
}

Failure unexpected_reply(std::string_view what) {
  return Failure{Failure::Kind::protocol, "unexpected reply to " + std::string(what)};
}

namespace {

// What to do about the server errors an operator is likely to meet.
const char* hint_for(const std::string& code) {
  if (code == "NOAUTH")
    return "give the password in the URL, RLOCK_PASSWORD, REDISCLI_AUTH, --password-file, "
           "--password-command, or password in the config file: rlock help connection";
  if (code == "WRONGPASS") return "the user or password is wrong";
  if (code == "READONLY") return "this is a read-only replica: point --redis at the primary";
  if (code == "OOM")
    return "Redis reached maxmemory and evicts nothing: free memory or raise maxmemory";
  if (code == "NOPERM") return "the ACL user may not run this command or touch this key";
  if (code == "MASTERDOWN") return "the replica lost its primary";
  return nullptr;
}

// The command that the line LINE of SCRIPT's text (as sent) calls, upper case; empty when the
// line calls none.
std::string command_on_line(const Script& script, int line) {
  std::string_view text = script.source();
  for (int n = 1; n < line && !text.empty(); ++n) {
    size_t nl = text.find('\n');
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
  }
  text = text.substr(0, text.find('\n'));
  size_t call = text.find("call('");
  if (call == std::string_view::npos) return "";
  std::string_view name = text.substr(call + 6);
  return std::string(name.substr(0, name.find('\'')));
}

}  // namespace

Failure Redis::server_failure(const std::string& error) const {
  std::string code = error_code(error);
  // A server that wants a password cuts off long commands from a client that gave none, before
  // it would say NOAUTH.
  std::string message = name() + ": " + error;
  if (error.find("unauthenticated") != std::string::npos) {
    code = "NOAUTH";
    message = name() + ": wants a password (it cut off a command sent without one: " + error + ")";
  }
  if (const char* hint = hint_for(code)) message += " (" + std::string(hint) + ")";
  return Failure{Failure::Kind::server, message, code};
}

Failure Redis::server_failure(const std::string& error, const Argv& command) const {
  Failure failure = server_failure(error);
  bool wrong_type = failure.code == "WRONGTYPE";
  if ((failure.code != "NOPERM" && !wrong_type) || command.empty() ||
      command[0].starts_with("EVAL"))
    return failure;
  // The key of a command rlock reads with: its first argument, or XREAD's after STREAMS.
  auto streams = std::find(command.begin(), command.end(), "STREAMS");
  std::string key = streams != command.end() && streams + 1 != command.end() ? streams[1]
                    : command.size() > 1                                     ? command[1]
                                                                             : "";
  if (wrong_type) {
    failure.message += " (" + key + " holds another type than rlock keeps there, which " +
                       command[0] + " refuses: another program's key? Deleting it lets rlock " +
                       "use it again)";
    return failure;
  }
  std::string denied =
      error.find("access") != std::string::npos && error.find("key") != std::string::npos
          ? "the ACL user's key patterns do not allow " + key + ", which rlock reads with " +
                command[0]
          : "the ACL user may not run " + command[0] + (key.empty() ? "" : " on " + key);
  failure.message = name() + ": " + error + " (" + denied +
                    ": rlock-redis(7) \"Least privilege\" has the ACL rules rlock needs)";
  return failure;
}

// Each server words it its own way (CONTRIBUTING.md, "Other servers"):
// - a command called inside the script: Redis 6.x and 7.0 say "The user executing the script
//   can't run this command or subcommand", and where ("@user_script:15", the line of the
//   script's text as sent, which names the command); Redis 7.2 and later and Valkey say
//   "ACL failure in script: User U has no permissions to run the 'time' command";
// - a key: "this user has no permissions to access one of the keys used as arguments" (Redis
//   6.x and 7.0, for the script's KEYS), "No permissions to access a key" (Redis 7.2 and later,
//   Valkey), "can't access at least one of the keys" (Redis 6.x and 7.0, inside the script).
std::optional<std::string> denied_in_script(const Script& script, const Argv& keys,
                                            std::string_view error) {
  std::string command;
  size_t at = error.find("permissions to run the '");
  if (error.find("ACL failure in script") != std::string_view::npos &&
      at != std::string_view::npos) {
    std::string_view name = error.substr(at + 24);
    command = std::string(name.substr(0, name.find('\'')));
  } else if (error.find("can't run this command") != std::string_view::npos) {
    at = error.find("@user_script:");
    if (at == std::string_view::npos) return std::nullopt;
    std::string_view digits = error.substr(at + 13);
    digits.remove_prefix(std::min(digits.find_first_not_of(' '), digits.size()));
    int line = 0;
    std::from_chars(digits.data(), digits.data() + digits.size(), line);
    command = command_on_line(script, line);
  }
  if (!command.empty()) {
    for (char& c : command)
      c = c == '|' ? ' ' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return "the ACL user may not run " + command + ", which rlock's scripts call: rlock-redis(7) " +
           "\"Least privilege\" has the ACL rules rlock needs";
  }
  for (const char* wording :
       {"permissions to access one of the keys", "No permissions to access a key",
        "can't access at least one of the keys"})
    if (error.find(wording) != std::string_view::npos) {
      std::string list;
      for (const std::string& key : keys) list += (list.empty() ? "" : ", ") + key;
      return "the ACL user's key patterns must allow every key of this lock: " + list;
    }
  return std::nullopt;
}

Failure script_failure(const Redis& redis, const Script& script, const Argv& keys,
                       const std::string& error) {
  Failure failure = redis.server_failure(error);
  if (auto what = denied_in_script(script, keys, error)) {
    failure.message = redis.name() + ": " + error + " (" + *what + ")";
    failure.code = "NOPERM";
  } else if (failure.code == "WRONGTYPE" && !keys.empty()) {
    // The error does not say which key: rlock status names it (it reads each on its own).
    std::string list;
    for (const std::string& key : keys) list += (list.empty() ? "" : ", ") + key;
    failure.message += " (one of " + list + " holds another type than rlock keeps there: " +
                       "another program's key? rlock status of the lock names it; deleting it " +
                       "lets rlock use it again)";
  }
  return failure;
}

}  // namespace rlock
