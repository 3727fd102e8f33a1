// What rlock stores under a lock key. One line that `redis-cli GET KEY` shows an operator as is:
//
//   rlock/1 7f3c...(32 hex) host=web-2 pid=4121 user=deploy since=2026-11-30T03:12:00.123Z
//   cmd=report.sh boot=3f2a9c41d07e pstart=48213377 pidns=4026531836 ttl=30000 fence=17
//
// ttl (ms) is what the holder renews it with: an observer tells a late renewal by it.
// boot (the host's boot id) and pstart (the pid's start time, in clock ticks since boot) let
// an operator's rlock on the same host tell a holder process that is gone from a live one;
// pidns (the inode of the holder's PID namespace) says in which namespace that pid is: a
// holder in a container that shares the host's name and boot has a pid of its own there.
// group=1 (acquire --while-pid of a process group's leader) says that the lock is held for the
// pid's process group: its keeper renews it while any process of the group lives, after the
// pid itself has exited.
//
// `release --force` leaves a tombstone in its place until the broken holder has surely stopped:
//
//   rlock/1 broken 7f3c... host=web-2 pid=4121 ... fence=17 broken_by=alice@ops-1
//   broken_at=2026-11-30T03:40:00.000Z broken_reason=hung%20on%20the%20db
//
// that is, the old value after "broken", or "-" for another program's, and who broke it when.
// No token can be "broken", so no holder takes it for its own; older rlocks see another
// program's lock.
//
// The token comes first so that the ownership check in the Lua scripts is a prefix compare.
// The command's arguments are never stored: they may hold secrets.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "util/wall_time.h"

namespace rlock {

inline constexpr std::string_view k_value_magic = "rlock/1 ";
inline constexpr size_t k_token_bytes = 16;  // 128 bits from the OS CSPRNG

struct Holder {
  std::string host;
  int64_t pid = 0;
  std::string user;
  WallTime since{};
  std::string cmd;
  std::string boot;         // the first 12 hex digits of the host's boot id; empty: unknown
  int64_t start_ticks = 0;  // when PID started, clock ticks since boot (/proc); 0: unknown
  std::string pidns;        // the inode of PID's PID namespace; empty: unknown (older rlocks)
  // Held for PID's process group (PID leads it): the lock is in use while any process of the
  // group lives, not only PID, so PID gone does not mean the lock is left over.
  bool group = false;
};

// Who broke a lock with `release --force`, and when.
struct Breaking {
  std::string by;  // USER@HOST
  WallTime at{};
  std::string reason;  // release --force --reason, or empty
};

struct LockValue {
  std::string token;
  Holder holder;
  std::optional<int64_t> fence;    // set by the acquire script, not by the client
  std::optional<int64_t> ttl_ms;   // the ttl its holder takes and renews it with
  std::optional<Breaking> broken;  // a tombstone: the holder above was broken (token may be
                                   // empty: another program's lock was)
};

inline constexpr std::string_view k_tombstone_magic = "rlock/1 broken ";

// A fresh token: k_token_bytes from getrandom(2), hex-encoded. Throws Error if the OS fails.
std::string make_token();

// Whether TEXT has the form of a token make_token() returns.
bool is_token(std::string_view text);

// The value's first bytes, "rlock/1 TOKEN ": a value is ours exactly when it starts with this.
std::string owner_prefix(std::string_view token);

// The value without " fence=N", which the acquire script appends.
std::string encode_lock_value(const LockValue& v);
// S as a field's value in a line of NAME=VALUE fields (the value, a run's phase): percent-escaped
// where it would break the line apart (space, control bytes, '%' and '=').
std::string escape_field(std::string_view s);

// nullopt for a value rlock did not write (a plain string from other software).
std::optional<LockValue> decode_lock_value(std::string_view text);

// The fields a tombstone ends with: " broken_by=USER@HOST broken_at=T" for this process's user
// and host, now (the break script puts them after the old value), and " broken_reason=R" with
// REASON, when given.
std::string tombstone_fields(const std::string& reason = "");

// This process as a holder: host (or $RLOCK_HOSTNAME), pid, user, now, and CMD's base name.
Holder current_holder(std::string_view cmd);
// USER@HOST of this process (a space made _), as an operator's action names who did it: a
// stop, a pause, a forced release, a history entry.
std::string operator_name();

// What runs of a holder, as told on its own host.
enum class Liveness {
  unknown,              // another host, another boot, or a value without boot and pstart
  other_pid_namespace,  // this host and boot, another PID namespace (a container): unknown too
  running,              // its process runs
  group_running,        // its process is gone, but the lock is held for its process group, and a
                        // process of that group still runs
  gone,                 // its process (and, for a group's lock, every process of the group) is gone
};

// Judged on this host only (same host name, same boot) and from the holder's own PID namespace
// (its pid means another process anywhere else) by the holder's pid and that pid's start
// time, so that a reused pid is not taken for it; for a group's lock (group=1), by what is left
// of the group once the pid is gone. A group's id is no one else's while the group exists.
Liveness holder_liveness(const Holder& h);

// The pid of the command that the `rlock run` of H runs, when H runs on this host and in this
// PID namespace (liveness running): the child of H's pid that is not its guardian. Nothing
// elsewhere, or for another holder (a script's lock of `acquire --while-pid`).
std::optional<int64_t> holder_command_pid(const Holder& h);

// Process PID as the holder, for `rlock acquire`, which exits at once: the script that called
// it (our parent, or --while-pid's) is what holds the lock. Its name comes from /proc.
Holder process_holder(pid_t pid);

}  // namespace rlock
