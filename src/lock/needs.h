// What rlock needs of a server's ACL, for rlock doctor: the commands rlock sends and those its
// scripts call, each tried on a lock's keys in a form that changes nothing, and what each
// denial costs.
#pragma once

#include <string>
#include <vector>

#include "redis/redis.h"
#include "util/error.h"

namespace rlock {

// A command the ACL user may not run, or may not run on one of a lock's key families.
struct Denial {
  std::string command;  // "PEXPIRE"
  enum class On { command, lock_keys, output_keys } on = On::command;
  const char* needed_by;  // "run, acquire, pause (rlock's scripts)"
  bool optional;          // only an optional feature fails (list, watch's notifications ...)
};

struct CommandCheck {
  std::vector<Denial> denied;
  // What could not be tried, and why ("the commands rlock's scripts call: EVAL_RO needs Redis
  // 7.0"); empty when everything was.
  std::vector<std::string> unchecked;
};

// Tries, on REDIS (one server, a Sentinel's primary, a Cluster: the master of KEY's slot),
// every command rlock needs, on KEY's keys where it takes one: reads of keys that do not
// exist, writes that are refused after the ACL's check (a read-only script's, an ID that
// Redis refuses) or find nothing to change. MIN_REPLICAS: whether WAIT is needed.
Result<CommandCheck> check_commands(Redis& redis, const std::string& key, bool min_replicas,
                                    TimePoint deadline);

// Whether an error reply is an ACL denial (NOPERM, or a script's "can't run this command",
// "ACL failure", in any server's wording), and whether of a key rather than of the command.
bool is_acl_denial(const std::string& error);
bool is_key_denial(const std::string& error);

}  // namespace rlock
