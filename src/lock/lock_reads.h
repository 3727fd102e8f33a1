// How the operator views read locks (lock_state.cpp, lock_list.cpp): commands pipelined in
// one round trip, each reply found again by name, and a lock's state decoded from them.
// Private to src/lock/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lock/lock_state.h"
#include "redis/redlock.h"

namespace rlock {

inline constexpr size_t k_not_asked = SIZE_MAX;
// The most bytes of a lock's value read: rlock's are a few hundred, a tombstone's reason
// included; another program's longer value is read this far (docs/DESIGN.md, "Reads with a
// bound").
inline constexpr size_t k_value_read_most = 64 * 1024;

// Commands sent in one round trip. Each reply is found again by the index add() gave its
// command, which the caller keeps under a name (LockReads), never by counting positions.
class Pipeline {
public:
  // ANY_TYPE: the command's key may hold another type (the lock's own key: a hash is no lock);
  // WRONGTYPE of any other is a helper key that another program wrote over.
  size_t add(Argv argv, bool any_type = false) {
    commands_.push_back(std::move(argv));
    any_type_.push_back(any_type);
    return commands_.size() - 1;
  }
  bool empty() const { return commands_.empty(); }
  // What an ACL denial of one of the commands does: fail the whole, naming what was denied
  // (a verb that names its keys), or leave that reply an error for the caller to pass over
  // (list's looks at keys that SCAN found, which may be another tenant's).
  enum class Denied { fails, skipped };
  // Sends the commands. Says nothing of what it finds: a helper key of another type is a
  // reply that wrong_type() names, and the verbs decide what to tell of it.
  Result<Unit> run(Redis& redis, Denied denied = Denied::fails) {
    auto replies = redis.pipeline(commands_, Clock::now() + redis.command_timeout());
    if (!replies) return replies.failure();
    replies_ = std::move(*replies);
    if (denied == Denied::skipped) return Unit{};
    if (auto failure = denial(redis)) return *failure;
    return Unit{};
  }
  // Redlock: sends the commands to every node at once, one round trip, and waits for a
  // quorum's replies, then the others' for a moment (quorum_then_the_rest()): each node's
  // replies as a Pipeline of its own, or why it gave none (an ACL denial as with run()).
  std::vector<Result<Pipeline>> broadcast(Redis& redis) const {
    auto replies = redis.broadcast(commands_, Clock::now() + redis.command_timeout(), {},
                                   quorum_then_the_rest(redis.node_count()));
    std::vector<Result<Pipeline>> out;
    for (size_t i = 0; i < replies.size(); ++i) {
      if (!replies[i]) {
        out.emplace_back(replies[i].failure());
        continue;
      }
      Pipeline node = *this;
      node.replies_ = std::move(*replies[i]);
      auto denied = node.denial(redis.node(i));
      out.push_back(denied ? Result<Pipeline>(*denied) : Result<Pipeline>(std::move(node)));
    }
    return out;
  }
  // The message naming the helper key of the command added as AT when it holds another type
  // than rlock keeps there (docs/DESIGN.md, "Reads with a bound"), or nothing: runs may fail
  // on such a key, and the lock is shown all the same.
  std::optional<std::string> wrong_type(const Redis& redis, size_t at) const {
    if (at == k_not_asked || any_type_[at]) return std::nullopt;
    const Reply& reply = replies_[at];
    if (reply.type != Reply::Type::error || !reply.str.starts_with("WRONGTYPE"))
      return std::nullopt;
    return redis.server_failure(reply.str, commands_[at]).message;
  }
  const Argv& command(size_t at) const { return commands_[at]; }
  // The reply to the command added as AT; nullptr when it was not asked.
  const Reply* operator[](size_t at) const { return at == k_not_asked ? nullptr : &replies_[at]; }

private:
  // The first ACL denial among the replies, naming what was denied.
  std::optional<Failure> denial(const Redis& redis) const {
    for (size_t i = 0; i < replies_.size(); ++i)
      if (replies_[i].type == Reply::Type::error && replies_[i].str.starts_with("NOPERM"))
        return redis.server_failure(replies_[i].str, commands_[i]);
    return std::nullopt;
  }

  std::vector<Argv> commands_;
  std::vector<bool> any_type_;
  std::vector<Reply> replies_;
};

// What a Pipeline asks about one lock, each reply under its name; k_not_asked for what the
// caller needs not show.
struct LockReads {
  size_t type = k_not_asked;              // TYPE KEY
  size_t value = k_not_asked;             // GETRANGE KEY: its first bytes
  size_t pttl = k_not_asked;              // PTTL KEY
  size_t fence = k_not_asked;             // the fence counter (GET)
  size_t fence_pttl = k_not_asked;        // how long it is kept (PTTL)
  size_t history_pttl = k_not_asked;      // how long the history is kept (PTTL)
  size_t alive = k_not_asked;             // the waiters' places, the latest expiries
  size_t alive_count = k_not_asked;       // how many there are (ZCARD)
  size_t queue = k_not_asked;             // the first waiters in arrival order
  size_t queue_count = k_not_asked;       // how many there are (ZCARD)
  size_t sharers = k_not_asked;           // the waiters that want to share (--shared)
  size_t semaphore = k_not_asked;         // the semaphore's places, the latest expiries
  size_t semaphore_count = k_not_asked;   // how many there are (ZCARD)
  size_t semaphore_values = k_not_asked;  // their values (HSCAN)
  size_t shared = k_not_asked;            // a shared lock's places, the latest expiries
  size_t shared_count = k_not_asked;      // how many there are (ZCARD)
  size_t shared_values = k_not_asked;     // their values (HSCAN)
  size_t history = k_not_asked;           // the newest runs (XREVRANGE)
  size_t pause = k_not_asked;             // a pause (rlock pause: GET)
  size_t pause_pttl = k_not_asked;        // its time left (PTTL)
  size_t ended = k_not_asked;             // the ended runs' key (ZCARD): its type alone
  size_t phases = k_not_asked;            // the holders' runs' phases (HSCAN)
  size_t last_output = k_not_asked;       // when the kept runs last printed (ZREVRANGE)
};

// GET and PTTL of KEY.
void ask_value(Pipeline& p, LockReads& r, const std::string& key);
// A semaphore's and a shared lock's places, and their values.
void ask_places(Pipeline& p, LockReads& r, const std::string& key);
// When the runs that keep their output last printed (kept_output.h).
void ask_last_output(Pipeline& p, LockReads& r, const std::string& key);
// The waiters' places and the newest runs of the history.
void ask_waiters_and_history(Pipeline& p, LockReads& r, const std::string& key);

// The state of KEY from what R asked in P, at the server's NOW_MS. TYPE is the key's type when
// R did not ask it (a look before did). A reply not asked leaves its part of the state empty.
Result<LockState> decode_lock(Redis& redis, const std::string& key, const std::string& type,
                              const Pipeline& p, const LockReads& r, int64_t now_ms);

// The server's clock from the TIME reply AT of P.
Result<int64_t> server_now(Redis& redis, const Pipeline& p, size_t at);

}  // namespace rlock
