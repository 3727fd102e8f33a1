#include "lock/needs.h"

#include "lock/lock.h"
#include "lock/lock_value.h"
#include "lock/scripts.h"

namespace rlock {

namespace {

// A command as rlock sends it, in a form that changes nothing.
struct Probe {
  Argv argv;
  Denial::On on;
  const char* needed_by;
  bool optional = false;
};

constexpr const char* k_scripts_need =
    "rlock's scripts: run, acquire, extend, release, pause, stop";
constexpr const char* k_output_needs = "--keep-output and logs";

}  // namespace

bool is_acl_denial(const std::string& error) {
  for (const char* words : {"NOPERM", "no permissions", "No permissions", "can't run this command",
                            "can't access", "ACL failure"})
    if (error.find(words) != std::string::npos) return true;
  return false;
}

bool is_key_denial(const std::string& error) {
  return is_acl_denial(error) && (error.find(" key") != std::string::npos);
}

Result<CommandCheck> check_commands(Redis& redis, const std::string& key, bool min_replicas,
                                    TimePoint deadline) {
  using On = Denial::On;
  // Keys of KEY's that no one else uses: a probe that would change one (LPOP, LREM) finds
  // nothing there.
  const std::string probe = "doctor-probe-" + make_token().substr(0, 16);
  const std::string lock_key = key, helper = helper_key(key, probe),
                    output = kept_output_key(key, probe);
  const std::vector<Probe> probes{
      {{"TIME"}, On::command, "the server's clock, for every lock"},
      {{"EVALSHA", std::string(40, '0'), "0"}, On::command, k_scripts_need},
      {{"EVAL", "return 1", "0"}, On::command, k_scripts_need},
      {{"GETRANGE", lock_key, "0", "0"}, On::lock_keys, "status, inspect, list, history"},
      {{"GET", lock_key}, On::lock_keys, "status, inspect"},
      {{"TYPE", lock_key}, On::lock_keys, "status, inspect, list"},
      {{"PTTL", lock_key}, On::lock_keys, "status, --min-replicas"},
      {{"EXISTS", helper}, On::lock_keys, "status, logs"},
      {{"HGETALL", helper}, On::lock_keys, "status, inspect"},
      {{"HMGET", helper, "f"}, On::lock_keys, "status, inspect"},
      {{"ZRANGE", helper, "0", "0"}, On::lock_keys, "inspect, watch"},
      {{"ZCARD", helper}, On::lock_keys, "status, inspect"},
      {{"XRANGE", helper, "-", "+", "COUNT", "1"}, On::lock_keys, "history, check"},
      {{"HSCAN", helper, "0"}, On::lock_keys, "status, inspect, history"},
      {{"HGET", helper, "f"}, On::lock_keys, "release --force"},
      {{"ZREVRANGE", helper, "0", "0"}, On::lock_keys, "status, inspect"},
      {{"LRANGE", helper, "0", "0"}, On::lock_keys, "stop"},
      {{"LREM", helper, "0", "v"}, On::lock_keys, "stop"},
      {{"LPOP", helper}, On::lock_keys, "stop"},
      {{"BLPOP", helper, "0.01"}, On::lock_keys, "run --wait, and stop's requests"},
      {{"SCAN", "0", "COUNT", "1"}, On::command, "list", true},
      {{"WAIT", "0", "0"}, On::command, "--min-replicas", !min_replicas},
      {{"XRANGE", output, "-", "+", "COUNT", "1"}, On::output_keys, "logs", true},
      {{"XREVRANGE", output, "+", "-", "COUNT", "1"}, On::output_keys, "logs", true},
      {{"XREAD", "COUNT", "1", "STREAMS", output, "0-0"}, On::output_keys, "logs -f", true},
      {{"ZCOUNT", output, "0", "0"}, On::output_keys, "logs -f", true},
      {{"ZREVRANGE", output, "0", "0"}, On::output_keys, "logs", true},
  };
  std::vector<Argv> commands;
  for (const Probe& p : probes) commands.push_back(p.argv);
  commands.push_back({"EVAL_RO", std::string(scripts::doctor_probe.source()), "2", helper, output});
  auto replies = redis.pipeline(commands, deadline);
  if (!replies) return replies.failure();

  CommandCheck check;
  auto deny = [&](const std::string& command, const std::string& error, On family,
                  const char* needed_by, bool optional) {
    On on = is_key_denial(error) ? family : On::command;
    for (const Denial& d : check.denied)
      if (d.command == command && d.on == on) return;
    check.denied.push_back({command, on, needed_by, optional || on == On::output_keys});
  };
  for (size_t i = 0; i < probes.size(); ++i) {
    const Reply& r = (*replies)[i];
    if (r.type == Reply::Type::error && is_acl_denial(r.str))
      deny(probes[i].argv[0], r.str, probes[i].on, probes[i].needed_by, probes[i].optional);
  }
  const Reply& scripted = replies->back();
  if (scripted.type == Reply::Type::error) {
    bool unknown = scripted.str.find("unknown command") != std::string::npos;
    check.unchecked.push_back(
        "the commands rlock's scripts call: " +
        (is_acl_denial(scripted.str)
             ? std::string("the ACL denies EVAL_RO, with which doctor tries them")
         : unknown ? std::string("EVAL_RO, with which doctor tries them, needs Redis 7.0")
                   : "EVAL_RO: " + scripted.str));
    return check;
  }
  // Each command's name and its errors on the two keys: a write the ACL allows was refused
  // only as a write from a read-only script, which is no denial.
  const auto& e = scripted.elements;
  for (size_t i = 0; i + 2 < e.size(); i += 3) {
    if (is_acl_denial(e[i + 1].str))
      deny(e[i].str, e[i + 1].str, On::lock_keys, k_scripts_need, false);
    if (is_acl_denial(e[i + 2].str))
      deny(e[i].str, e[i + 2].str, On::output_keys, k_output_needs, true);
  }
  return check;
}

}  // namespace rlock
