// Signals as events: the signals rlock acts on are blocked in every thread and read from a
// signalfd in the main loop, so no handler ever runs concurrently with rlock's own code.
#pragma once

#include <signal.h>

#include <optional>
#include <string>
#include <string_view>

#include "util/fd.h"

namespace rlock {

// Whether SIG is one whose default action ends a process and that can be caught: HUP, INT,
// QUIT, TERM, USR1, USR2, ALRM, VTALRM, PROF, IO, PWR, XCPU, XFSZ, STKFLT, the signals of faults
// (ILL, TRAP, ABRT, BUS, FPE, SEGV, SYS) and the real-time ones. rlock never dies of one with
// its lock held: it forwards it to the command's group (rlock-run(1) "Signals and terminals");
// before the command runs it ends the wait or the run there. PIPE is the exception: rlock ignores
// it, so that its own writes see EPIPE.
bool ends_a_process(int sig);

class SignalEvents {
public:
  // Blocks the signals that end a process (those not ignored when rlock started; an ignored
  // signal stays ignored, for rlock and for the child, as nohup(1) and `cmd &` expect),
  // SIGWINCH, SIGCHLD, SIGTTOU and SIGTTIN; ignores SIGPIPE; takes SIGCHLD back from SIG_IGN, under
  // which the kernel would reap the child itself and rlock never learn how it ended. Call before
  // any thread starts: threads inherit the mask. They stay so until rlock exits.
  SignalEvents();
  ~SignalEvents();
  SignalEvents(const SignalEvents&) = delete;
  SignalEvents& operator=(const SignalEvents&) = delete;

  int fd() const { return fd_.get(); }
  // The next pending signal, or nullopt when none is pending. A signal that the kernel raised
  // for rlock's own limits (SIGXFSZ from `ulimit -f`, SIGXCPU from `ulimit -t`) or that rlock
  // raised itself is not the command's: it is said once and skipped.
  std::optional<int> next();
  // The next pending signal that ends a process (ends_a_process), skipping any other: while
  // there is no command to forward it to, such a signal is a request to stop.
  std::optional<int> next_request_to_stop();

  // For a freshly forked child, before exec: the dispositions and the signal mask rlock started
  // with. Async-signal-safe.
  void restore_for_child() const;

  // Once the command is about to run: SIGTSTP (unless ignored at start) and SIGCONT become
  // events too, so that rlock can stop with its command and hand it the terminal when
  // continued (rlock-run(1) "Job control"). Before this, while waiting for the lock, Ctrl-Z stops
  // rlock as it stops any program. Call from the main thread before other threads start.
  void watch_job_control();

  // Stops rlock with SIG (SIGTSTP, SIGTTIN, SIGTTOU or SIGSTOP), sent to rlock alone or, with
  // WHOLE_GROUP, to its whole process group (as the terminal would have, had rlock's group
  // been the foreground one), and returns once rlock is continued: true, or false when it was
  // not stopped at all (an orphaned process group ignores the terminal's stop signals).
  bool stop_self(int sig, bool whole_group);

private:
  Fd fd_;
  sigset_t mask_;  // what fd_ reads
  sigset_t old_mask_;
  struct sigaction old_pipe_;
  struct sigaction old_child_;
  bool said_xcpu_ = false, said_xfsz_ = false;  // next(): said once
};

}  // namespace rlock

namespace rlock {

// "TERM", "SIGTERM", "term" or "15"; nullopt for anything else.
std::optional<int> parse_signal(std::string_view text);
// "TERM" for SIGTERM; the number for signals without a name here.
std::string signal_name(int sig);

}  // namespace rlock
