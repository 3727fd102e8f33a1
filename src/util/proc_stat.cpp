#include "util/proc_stat.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "util/fd.h"

namespace rlock {

std::optional<ProcStat> read_proc_stat(int64_t pid) {
  char path[32];
  std::snprintf(path, sizeof path, "/proc/%lld/stat", static_cast<long long>(pid));
  // One read into the stack, not read_small_file(): a group poll reads this for every process.
  Fd fd(::open(path, O_RDONLY | O_CLOEXEC));
  char buf[1024];
  ssize_t n = fd.valid() ? ::read(fd.get(), buf, sizeof buf - 1) : -1;
  if (n <= 0) return std::nullopt;
  buf[n] = '\0';
  // "pid (comm) state ppid pgrp ... starttime(22nd field)": comm may hold anything, so count
  // the fields after its last ')'.
  const char* p = std::strrchr(buf, ')');
  if (!p || p[1] != ' ' || !p[2]) return std::nullopt;
  ProcStat st;
  st.state = p[2];
  for (int field = 3; field <= 22 && p; ++field) {  // p: the space before field FIELD
    p = std::strchr(p + 1, ' ');
    if (p && field == 5) st.pgrp = std::strtoll(p + 1, nullptr, 10);
  }
  if (!p) return std::nullopt;
  st.start_ticks = std::strtoll(p + 1, nullptr, 10);
  return st;
}

int live_processes_in_group(int64_t pgid) {
  DIR* proc = ::opendir("/proc");
  if (!proc) return 1;  // cannot tell: take the group for alive
  int live = 0;
  while (const dirent* entry = ::readdir(proc)) {
    if (entry->d_name[0] < '1' || entry->d_name[0] > '9') continue;
    auto st = read_proc_stat(std::strtoll(entry->d_name, nullptr, 10));
    if (st && st->pgrp == pgid && !has_exited(st->state)) ++live;
  }
  ::closedir(proc);
  return live;
}

}  // namespace rlock
