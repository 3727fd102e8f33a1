// The Lua scripts rlock sends to Redis, one file each in src/lua/ (where each says what it
// does, the race it closes, and its KEYS and ARGV). The build embeds them (cmake/embed_lua.cmake):
// a script's text and its SHA-1, which CMake computes, lie in read-only data, so a run neither
// reads, copies nor hashes a script (hashing them at run time cost 0.15 ms a run,
// docs/PERFORMANCE.md). A script that uses common.lua (the clock and the waiting queue),
// slots.lua (semaphore slots) or sharing.lua (shared locks) gets that text in front of its own.
#pragma once

#include "redis/redis.h"

namespace rlock::scripts {

// The lock (lock.cpp): a mutex ...
extern const Script acquire;
extern const Script renew;
extern const Script release;
// ... a semaphore (--limit) ...
extern const Script semaphore_acquire;
extern const Script semaphore_renew;
extern const Script semaphore_release;
extern const Script semaphore_holds;
// ... a shared lock (--shared; its places renew and are held as a semaphore's slots are) ...
extern const Script shared_acquire;
extern const Script shared_release;
// ... the waiting queue of each, and release --force.
extern const Script leave_queue;
extern const Script break_lock;
extern const Script break_slots;

// A --once-per period's slot (history.cpp).
extern const Script period_claim;
extern const Script period_finish;
extern const Script period_reset;

// A run's history entry, recorded once however often it is sent (history.cpp).
extern const Script history_add;
extern const Script history_start;  // an attempt's, under --retry

// rlock stop's requests to holders (stop_request.cpp).
extern const Script stop;
extern const Script stop_answer;
extern const Script stop_withdraw;

// A run's kept output (kept_output.cpp).
extern const Script output_start;
extern const Script output_append;

// rlock pause and resume (pause.cpp).
extern const Script pause;
extern const Script unpause;
extern const Script resume;

// rlock doctor's check of the commands the ACL user may run (needs.cpp).
extern const Script doctor_probe;

}  // namespace rlock::scripts
