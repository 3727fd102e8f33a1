// Exit statuses: the contract of man/rlock.1 EXIT STATUS, in one place. man/rlock.1 (EXIT STATUS)
// and the README carry the same table; tests/integration/test_docs.py checks that they agree with
// this enum.
#pragma once

namespace rlock {

enum ExitStatus : int {
  k_exit_ok = 0,
  k_exit_not_held = 1,      // status, inspect, release --force: free; extend, release: not ours;
                            // check: no run succeeded within the period
  k_exit_usage = 64,        // bad flag, bad duration, missing command
  k_exit_unavailable = 69,  // Redis unreachable or refused us before the child started
  k_exit_busy = 75,         // lock not obtained (busy, or --wait ran out); changed by -E
  k_exit_lost = 76,         // lock lost while the child ran; the child was stopped
  k_exit_config = 78,       // configuration error (file, URL, TLS material)
  k_exit_hung = 79,         // the command stopped touching --heartbeat-file; it was stopped
  k_exit_stopped = 80,      // rlock stop asked the run to end; the command was stopped
  k_exit_max_run = 124,     // the child ran past --max-run and was stopped
  k_exit_internal = 125,    // rlock's own failure (fork, out of memory ...)
  k_exit_not_executable = 126,
  k_exit_not_found = 127,
};

// 128+N for a child killed by signal N, as a shell reports it.
constexpr int exit_status_for_signal(int signo) { return 128 + signo; }

}  // namespace rlock
