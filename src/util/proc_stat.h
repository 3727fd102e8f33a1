// What /proc/PID/stat says of a process: the facts rlock needs to tell a live process from a
// zombie or a reused pid. Linux only, as the rest of rlock.
#pragma once

#include <cstdint>
#include <optional>

namespace rlock {

struct ProcStat {
  char state = 0;           // R, S, D, T, Z (zombie), X (dead) ...
  int64_t pgrp = 0;         // its process group
  int64_t start_ticks = 0;  // when it started, in clock ticks since boot
};

// PID's entry; nullopt when there is no such process (or it vanished while being read).
std::optional<ProcStat> read_proc_stat(int64_t pid);

// Whether STATE is that of a process that has exited (a zombie nobody reaped, or dead).
inline bool has_exited(char state) { return state == 'Z' || state == 'X'; }

// How many processes of group PGID have not exited: zombies count for kill(2) but not here (a
// zombie whose parent never reaps it would stay for ever). 1 when /proc cannot be read.
int live_processes_in_group(int64_t pgid);

}  // namespace rlock
