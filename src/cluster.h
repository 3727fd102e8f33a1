// Redis Cluster: which hash slot a key lives in, and which key a command touches. Pure
// functions, unit-tested; the routing itself is in cluster.cpp (make_single_redis).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "reply.h"

namespace rlock {

inline constexpr int k_cluster_slots = 16384;

// KEY's hash tag: the part between its first '{' and the next '}', when that is not empty;
// Cluster hashes only the tag of a key that has one.
std::optional<std::string_view> hash_tag(std::string_view key);
// CRC16 (XMODEM) of the key, or of its hash tag: Redis Cluster's HASH_SLOT.
int key_slot(std::string_view key);

// The key that decides where ARGV runs: the first key of EVAL/EVALSHA, the first argument of
// the commands rlock sends with a key; nullopt for commands without one (TIME, SCAN, WAIT ...),
// which run where the command before them in the pipeline ran.
std::optional<std::string_view> command_key(const Argv& argv);

// A MOVED or ASK error reply: "MOVED 3999 127.0.0.1:6381".
struct Redirect {
  bool ask = false;
  int slot = 0;
  std::string host;
  int port = 0;
};
std::optional<Redirect> parse_redirect(const std::string& error);

}  // namespace rlock
