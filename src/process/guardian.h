// The guardian: a process of its own that stops the command's group when rlock cannot (child.h).
//
// Why the command dies with rlock, however rlock dies:
//
// The command runs in a process group of its own (so that signals and the terminal reach it and
// everything it started), which means nothing that kills rlock's group reaches it: not
// coreutils `timeout -s KILL` (it signals its whole group), not supervisord's killasgroup, not
// `kill -KILL -PGID`. PR_SET_PDEATHSIG would reach the command itself but not the processes it
// started. So a guardian process watches rlock: it holds the read end of a pipe whose only
// writer is rlock, and the kernel closes that end's last writer however rlock exits (SIGKILL,
// the OOM killer, a crash), so end of file means "rlock is gone": the guardian SIGKILLs the
// command's whole group at once. The guardian is in a process group of its own too, so the
// signal that kills rlock's group does not kill the guardian with it; it blocks the signals
// rlock forwards. If the guardian dies anyway (killed by pid or name), rlock starts another
// (replace_dead_guardian). If both die together (`pkill -KILL rlock`), the command itself still
// gets SIGKILL from the kernel (PR_SET_PDEATHSIG, set before exec), but what it started runs on.
// Out of reach: processes that left the group (setsid, a daemon's double fork); a
// cgroup-wide kill (systemd KillMode=control-group) needs no help.
//
// Why the command stops at the lease's end even when rlock cannot stop it:
//
// rlock's main process decides when the lease is lost, and its renewal thread is what extends
// it; both stop with rlock: a SIGSTOP, a debugger, a cgroup freezer on one process, a Ctrl-Z
// whose `fg` comes late, a host so loaded that rlock is not scheduled. A command that runs on
// meanwhile runs unlocked once the lease ends, beside the next holder. So the guardian, which
// is a process of its own, keeps a deadline too: the end of the last confirmed lease (send
// time + ttl - drift, the keeper's own deadline), written by the renewal thread into memory
// the two share each time a renewal succeeds. When rlock has not begun stopping the command by
// half of kill-after past the point where it would have (the deadline - kill-after), the
// guardian sends the kill signal (and CONT, so that a stopped command can act on it), and at
// the deadline SIGKILL, as rlock would have. Half of kill-after is rlock's head start, so that
// a rlock that is merely busy does the stopping, with its log lines, and the command is not
// signalled twice. The guardian needs nothing of rlock to do this: no lock, no allocation,
// only its own clock and kill(2). What it cannot cover is a frozen host: if the guardian is
// stopped too (a paused VM, a SIGSTOP of every process of the job), nothing runs, the
// command included; the next holder may start while it is frozen, and its fence is greater.
#pragma once

#include <sys/types.h>

#include <optional>

#include "process/child.h"

namespace rlock {

// Guardian protocol, on a pipe from rlock and the child to the guardian:
//   'p' + 4-byte pgid  from the child, just before exec: the group to kill
//   'q'                from rlock: exit quietly
//   end of file        every writer is gone, so rlock died: SIGKILL the group
inline constexpr char k_guard_pgid = 'p';
inline constexpr char k_guard_quit = 'q';

// The lease as the guardian sees it, in memory shared with rlock (MAP_SHARED: in TSan builds
// the guardian is a fork). Times are CLOCK_MONOTONIC nanoseconds, the steady clock's. Written
// with __atomic builtins, not std::atomic: the guardian calls no library function.
struct Child::GuardedLease {
  int64_t deadline_ns;    // 0: no lease to guard
  int64_t kill_after_ns;  // the kill signal goes out this long before the deadline
  int32_t kill_signal;
  int32_t stopping;  // rlock has begun stopping the command itself
  int32_t fired;     // the guardian signalled the group for the lease
};

// Starts the guardian on pipe end FD, guarding LEASE, in a process group of its own; returns
// its pid.
pid_t start_guardian(int fd, Child::GuardedLease* lease);

// The guardian's view of the lease, in memory it shares with rlock, fork or not.
Child::GuardedLease* map_guarded_lease(const std::optional<Child::Spec::Lease>& lease);

}  // namespace rlock
