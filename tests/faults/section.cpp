// The critical section of the fault suite's racers (tests/integration/test_faults.py): proves
// mutual exclusion with the kernel's help instead of trusting timestamps alone.
//
//   rlock_fault_section LOG PROBE_DIR SLOTS HOLD_MS [shared]
//
// Each of the SLOTS probe files stands for one of the lock's places (--limit SLOTS). On entry
// the section takes the flock of a free slot without blocking. With "shared" (a holder of
// rlock run --shared, SLOTS 1) it takes a shared flock (LOCK_SH) instead: shared sections may
// be inside together, but never beside one that holds the probe alone. The kernel drops that flock
// the instant the process dies, however it dies (SIGKILL from a guardian included), so finding
// every slot taken means another section is still alive inside: an overlap. The section then logs
// the overlap and the fence of the process in its way, blocks until the slot is free, and logs how
// long that took: the overlap window.
//
// Log lines (one write(2) each, O_APPEND, so racers' lines never interleave):
//   enter PID PPID FENCE T_NS SLOT
//   exit PID PPID FENCE T_NS SLOT
//   overlap PID PPID FENCE T_NS OTHER_FENCE
//   overlap_end PID PPID FENCE T_NS
// T_NS is CLOCK_MONOTONIC, one clock for every process on the machine.
#include <fcntl.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

long long now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

int log_fd = -1;
std::string fence;

void log_line(const char* what, const std::string& rest) {
  std::string line = std::string(what) + " " + std::to_string(getpid()) + " " +
                     std::to_string(getppid()) + " " + fence + " " + rest + "\n";
  if (write(log_fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) _exit(98);
}

std::string read_fence(int fd) {
  char buf[64] = {};
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  std::string s(buf, n > 0 ? static_cast<size_t>(n) : 0);
  return s.empty() ? "?" : s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5 && !(argc == 6 && std::string(argv[5]) == "shared")) {
    std::fprintf(stderr, "usage: %s LOG PROBE_DIR SLOTS HOLD_MS [shared]\n", argv[0]);
    return 2;
  }
  int mode = argc == 6 ? LOCK_SH : LOCK_EX;
  const char* env_fence = std::getenv("RLOCK_FENCE");
  fence = env_fence ? env_fence : "none";
  log_fd = open(argv[1], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (log_fd < 0) return 97;
  int slots = std::atoi(argv[3]);
  long hold_ms = std::atol(argv[4]);

  std::vector<int> fds;
  for (int i = 0; i < slots; ++i) {
    std::string path = std::string(argv[2]) + "/slot-" + std::to_string(i);
    int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return 97;
    fds.push_back(fd);
  }
  int slot = -1;
  for (int i = 0; i < slots && slot < 0; ++i)
    if (flock(fds[i], mode | LOCK_NB) == 0) slot = i;
  if (slot < 0) {
    log_line("overlap", std::to_string(now_ns()) + " " + read_fence(fds[0]));
    if (flock(fds[0], mode) != 0) return 96;
    slot = 0;
    log_line("overlap_end", std::to_string(now_ns()));
  }
  if (ftruncate(fds[slot], 0) != 0 || pwrite(fds[slot], fence.data(), fence.size(), 0) < 0)
    return 95;
  log_line("enter", std::to_string(now_ns()) + " " + std::to_string(slot));
  timespec hold{hold_ms / 1000, (hold_ms % 1000) * 1000000L};
  while (nanosleep(&hold, &hold) != 0) {}
  log_line("exit", std::to_string(now_ns()) + " " + std::to_string(slot));
  return 0;
}
