// Redis Cluster: which hash slot a key lives in, and which key a command touches. Pure
// functions, unit-tested; the routing itself is in cluster.cpp (make_single_redis).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "redis/reply.h"
#include "util/duration.h"

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

// Whether ERROR, an error reply, says the command was refused before it ran, for a while: a
// slot in migration whose keys are split between two nodes, or not all there yet (TRYAGAIN), a
// cluster without a quorum or a slot no node serves (CLUSTERDOWN), a node still loading its
// data after a restart (LOADING). Such a command is sent again after a pause, until the
// caller's deadline. Only the reply's first word counts: an error raised inside a script (Redis
// 6 wraps it, "ERR Error running script ...: -TRYAGAIN ...") may follow the script's writes.
bool refused_for_now(std::string_view error);

// The pause before the AGAIN-th (0 first) sending of a command refused for now or redirected
// too often: 20 ms, doubling up to 200 ms, so that a migration of a few hundred ms costs a few
// tries, and one of seconds one every 200 ms.
inline constexpr Millis k_refusal_pause_first{20};
inline constexpr Millis k_refusal_pause_cap{200};
Millis refusal_pause(int again);

}  // namespace rlock
