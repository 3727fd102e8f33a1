#include "process/signals.h"

#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>

#include "util/error.h"
#include "util/log.h"
#include "util/resources.h"
#include "util/stderr_writer.h"

namespace rlock {

namespace {

constexpr int k_ending_signals[] = {SIGHUP,  SIGINT,    SIGQUIT, SIGILL,  SIGTRAP,   SIGABRT,
                                    SIGBUS,  SIGFPE,    SIGUSR1, SIGSEGV, SIGUSR2,   SIGALRM,
                                    SIGTERM, SIGSTKFLT, SIGXCPU, SIGXFSZ, SIGVTALRM, SIGPROF,
                                    SIGIO,   SIGPWR,    SIGSYS};

// The kernel's own (SI_KERNEL: a CPU time limit) or rlock's to itself (a file size limit's
// SIGXFSZ comes as SI_USER from rlock's pid): about rlock's process, not a request to it.
bool raised_for_rlock(const signalfd_siginfo& info) {
  return info.ssi_code == SI_KERNEL ||
         (info.ssi_code == SI_USER && static_cast<pid_t>(info.ssi_pid) == ::getpid());
}

}  // namespace

bool ends_a_process(int sig) {
  if (sig >= SIGRTMIN && sig <= SIGRTMAX) return true;
  for (int s : k_ending_signals)
    if (s == sig) return true;
  return false;
}

SignalEvents::SignalEvents() {
  sigset_t mask;
  sigemptyset(&mask);
  auto block_unless_ignored = [&mask](int sig) {
    struct sigaction sa {};
    sigaction(sig, nullptr, &sa);
    if (sa.sa_handler != SIG_IGN) sigaddset(&mask, sig);
  };
  for (int sig : k_ending_signals) block_unless_ignored(sig);
  for (int sig = SIGRTMIN; sig <= SIGRTMAX; ++sig) block_unless_ignored(sig);
  // A terminal resized reaches a command that has no terminal of its own through rlock.
  sigaddset(&mask, SIGWINCH);
  sigaddset(&mask, SIGCHLD);
  // tcsetpgrp() from a background process group raises SIGTTOU; rlock hands the terminal to the
  // child and takes it back, so it must not be stopped by that.
  sigaddset(&mask, SIGTTOU);
  sigaddset(&mask, SIGTTIN);
  if (pthread_sigmask(SIG_BLOCK, &mask, &old_mask_) != 0)
    throw Error(k_exit_internal, "pthread_sigmask failed");
  sigdelset(&mask, SIGTTOU);
  sigdelset(&mask, SIGTTIN);
  mask_ = mask;
  fd_.reset(signalfd(-1, &mask_, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!fd_.valid()) throw system_call_error("cannot watch for signals", "signalfd");
  // A closed stdout or stderr must be an EPIPE we can report, not a silent death.
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ign, &old_pipe_);
  // Started with SIGCHLD ignored (a parent's choice, kept across exec), rlock would wait for an
  // exit the kernel had already reaped, and hold the lock for ever.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGCHLD, &dfl, &old_child_);
}

// The signals stay blocked: one arriving after the child ended (while rlock releases) must not
// replace the child's exit status with rlock's death by that signal.
SignalEvents::~SignalEvents() = default;

std::optional<int> SignalEvents::next() {
  signalfd_siginfo info;
  for (;;) {
    ssize_t n = ::read(fd_.get(), &info, sizeof info);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof info)) return std::nullopt;
    int sig = static_cast<int>(info.ssi_signo);
    if ((sig == SIGXCPU || sig == SIGXFSZ) && raised_for_rlock(info)) {
      bool& said = sig == SIGXCPU ? said_xcpu_ : said_xfsz_;  // XCPU comes every second
      if (!said)
        log_warning(sig == SIGXCPU ? "rlock used up its CPU time limit (ulimit -t)"
                                   : "rlock wrote past its file size limit (ulimit -f)");
      said = true;
      continue;
    }
    return sig;
  }
}

std::optional<int> SignalEvents::next_request_to_stop() {
  while (auto sig = next())
    if (ends_a_process(*sig)) return sig;
  return std::nullopt;
}

void SignalEvents::watch_job_control() {
  sigset_t more;
  sigemptyset(&more);
  struct sigaction sa {};
  sigaction(SIGTSTP, nullptr, &sa);
  if (sa.sa_handler != SIG_IGN) sigaddset(&more, SIGTSTP);
  // Blocking SIGCONT does not keep it from continuing rlock; it only makes it readable here.
  sigaddset(&more, SIGCONT);
  if (pthread_sigmask(SIG_BLOCK, &more, nullptr) != 0)
    throw Error(k_exit_internal, "pthread_sigmask failed");
  sigorset(&mask_, &mask_, &more);
  if (signalfd(fd_.get(), &mask_, 0) < 0) throw Error(k_exit_internal, errno_message("signalfd"));
}

bool SignalEvents::stop_self(int sig, bool whole_group) {
  // What rlock said (why it stops, how long the lock has) goes out first: its writer thread
  // stops with it.
  flush_stderr(k_exit_stderr_patience);
  sigset_t cont, just;
  sigemptyset(&cont);
  sigaddset(&cont, SIGCONT);
  const timespec now{};
  while (sigtimedwait(&cont, nullptr, &now) == SIGCONT) {}  // an old one says nothing
  struct sigaction sa {};
  sigaction(sig, nullptr, &sa);
  if (sig != SIGSTOP && sa.sa_handler != SIG_DFL) sig = SIGSTOP;  // the parent's choice
  ::kill(whole_group ? 0 : ::getpid(), sig);
  if (sig != SIGSTOP) {
    // Blocked in every thread (rlock's own signals are events), the stop signal is pending on
    // the process: unblocking it here delivers it, and its default action stops every thread
    // until SIGCONT. Blocked again after, so that the next one is an event again.
    sigemptyset(&just);
    sigaddset(&just, sig);
    pthread_sigmask(SIG_UNBLOCK, &just, nullptr);
    pthread_sigmask(SIG_BLOCK, &just, nullptr);
  }
  // Continued, SIGCONT is pending (blocked since watch_job_control()); not stopped, it is not.
  return sigtimedwait(&cont, nullptr, &now) == SIGCONT;
}

void SignalEvents::restore_for_child() const {
  // rlock installs no handler: the forwarded signals are as rlock found them (default, or
  // ignored). SIGPIPE and SIGCHLD it changed.
  sigaction(SIGPIPE, &old_pipe_, nullptr);
  sigaction(SIGCHLD, &old_child_, nullptr);
  sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
}

}  // namespace rlock

namespace rlock {

namespace {

struct NamedSignal {
  const char* name;
  int number;
};

constexpr NamedSignal k_signal_names[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},       {"QUIT", SIGQUIT},     {"KILL", SIGKILL},
    {"USR1", SIGUSR1}, {"USR2", SIGUSR2},     {"TERM", SIGTERM},     {"ALRM", SIGALRM},
    {"CONT", SIGCONT}, {"STOP", SIGSTOP},     {"TSTP", SIGTSTP},     {"TTIN", SIGTTIN},
    {"TTOU", SIGTTOU}, {"PIPE", SIGPIPE},     {"ABRT", SIGABRT},     {"WINCH", SIGWINCH},
    {"ILL", SIGILL},   {"TRAP", SIGTRAP},     {"BUS", SIGBUS},       {"FPE", SIGFPE},
    {"SEGV", SIGSEGV}, {"STKFLT", SIGSTKFLT}, {"CHLD", SIGCHLD},     {"URG", SIGURG},
    {"XCPU", SIGXCPU}, {"XFSZ", SIGXFSZ},     {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF},
    {"IO", SIGIO},     {"PWR", SIGPWR},       {"SYS", SIGSYS},
};

}  // namespace

std::optional<int> parse_signal(std::string_view text) {
  if (text.empty()) return std::nullopt;
  if (text[0] >= '0' && text[0] <= '9') {
    int n = 0;
    for (char c : text) {
      if (c < '0' || c > '9' || n > 1000) return std::nullopt;
      n = n * 10 + (c - '0');
    }
    if (n < 1 || n > SIGRTMAX) return std::nullopt;
    return n;
  }
  std::string upper;
  for (char c : text) upper += static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c);
  std::string_view name = upper;
  if (name.substr(0, 3) == "SIG") name.remove_prefix(3);
  for (const auto& s : k_signal_names)
    if (name == s.name) return s.number;
  return std::nullopt;
}

std::string signal_name(int sig) {
  for (const auto& s : k_signal_names)
    if (s.number == sig) return s.name;
  if (sig >= SIGRTMIN && sig <= SIGRTMAX)
    return sig == SIGRTMIN ? "RTMIN" : "RTMIN+" + std::to_string(sig - SIGRTMIN);
  return std::to_string(sig);
}

}  // namespace rlock
