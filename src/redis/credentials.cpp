#include "redis/credentials.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "util/clock.h"
#include "util/fd.h"
#include "util/resources.h"
#include "util/text.h"

extern char** environ;

namespace rlock {

namespace {

// The password command's output is read up to this much: a password, or a token of a few KB.
constexpr size_t k_max_password_output = 64 * 1024;

// "vault ..." for "VAULT_TOKEN=s.x vault kv get -field=pw secret/redis": the program, never an
// assignment's value nor an argument.
std::string command_label(const std::string& command) {
  return "the password command (" + shell_command_summary(command) + ")";
}

Failure credential_failure(const std::string& message) {
  return Failure{Failure::Kind::connect, message};
}

// Reads FD until end of file, DEADLINE, or LIMIT bytes; false on timeout.
bool read_until_eof(int fd, std::string& out, TimePoint deadline, size_t limit) {
  char buf[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    int n = ::poll(&p, 1, millis_until(deadline));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    ssize_t got = ::read(fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return true;
    if (out.size() < limit) out.append(buf, static_cast<size_t>(std::min<size_t>(got, limit)));
  }
}

}  // namespace

Result<std::string> read_password_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return credential_failure("cannot read the password file " + errno_message(path));
  std::ostringstream text;
  text << in.rdbuf();
  std::string password = text.str();
  if (!password.empty() && password.back() == '\n') password.pop_back();
  if (!password.empty() && password.back() == '\r') password.pop_back();
  if (password.empty()) return credential_failure("the password file " + path + " is empty");
  return password;
}

namespace {

// Why the command runs under an intermediate process: rlock reaps every child it has in one
// loop (child.h: the command's leftovers become its children), so a child of a renewal thread
// could be reaped by the main thread first and its exit status lost. The intermediate, forked
// here, forks the shell (ARGV) with stdin from NUL and stdout to OUT, waits for it and writes
// its pid and then its wait status to STATUS; whoever reaps the intermediate, the status
// arrives. Between fork and exec only async-signal-safe calls are made: rlock has threads.
// Returns the intermediate's pid (-1: fork failed).
pid_t fork_password_command(const char* const argv[], const Fd& nul, const Fd& out,
                            const Fd& status) {
  pid_t middle = ::fork();
  if (middle != 0) return middle;
  pid_t shell = ::fork();
  if (shell == 0) {
    ::setpgid(0, 0);  // a group of its own: killed whole when it runs too long
    ::dup2(nul.valid() ? nul.get() : STDIN_FILENO, STDIN_FILENO);
    ::dup2(out.get(), STDOUT_FILENO);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(SIGPIPE, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve("/bin/sh", const_cast<char**>(argv), environ);
    ::_exit(127);
  }
  int wait_status = 0x7f00;  // as if "exit 127", when the shell could not be forked
  (void)write_all(status.get(), &shell, sizeof shell);
  if (shell > 0)
    while (::waitpid(shell, &wait_status, 0) < 0 && errno == EINTR) {}
  (void)write_all(status.get(), &wait_status, sizeof wait_status);
  ::_exit(0);
}

// What the command that ended with WAIT_STATUS, having printed OUTPUT, gave: its first line.
Result<std::string> password_from(const std::string& label, int wait_status,
                                  const std::string& output) {
  if (WIFSIGNALED(wait_status))
    return credential_failure(label + " was killed by signal " +
                              std::to_string(WTERMSIG(wait_status)));
  if (WEXITSTATUS(wait_status) != 0)
    return credential_failure(label + " exited with status " +
                              std::to_string(WEXITSTATUS(wait_status)));
  std::string password = output.substr(0, output.find('\n'));
  if (!password.empty() && password.back() == '\r') password.pop_back();
  if (password.empty()) return credential_failure(label + " printed no password");
  return password;
}

}  // namespace

Result<std::string> run_password_command(const std::string& command, Millis timeout) {
  const std::string label = command_label(command);
  TimePoint deadline = Clock::now() + timeout;
  int out[2], status[2];
  if (::pipe2(out, O_CLOEXEC) != 0)
    return system_call_failure("cannot run " + label, "pipe2", errno);
  Fd out_read(out[0]), out_write(out[1]);
  if (::pipe2(status, O_CLOEXEC) != 0)
    return system_call_failure("cannot run " + label, "pipe2", errno);
  Fd status_read(status[0]), status_write(status[1]);
  Fd nul(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const char* argv[] = {"sh", "-c", command.c_str(), nullptr};
  pid_t middle = fork_password_command(argv, nul, out_write, status_write);
  if (middle < 0) return system_call_failure("cannot run " + label, "fork", errno, Call::spawning);
  out_write.reset();
  status_write.reset();

  std::string output;
  bool finished = read_until_eof(out_read.get(), output, deadline, k_max_password_output);
  pid_t shell = -1;
  int wait_status = 0;
  std::string reply;
  bool reported = read_until_eof(status_read.get(), reply, finished ? deadline : Clock::now(), 64);
  if (reply.size() >= sizeof shell) std::memcpy(&shell, reply.data(), sizeof shell);
  bool complete = finished && reported && reply.size() >= sizeof shell + sizeof wait_status;
  if (complete) {
    std::memcpy(&wait_status, reply.data() + sizeof shell, sizeof wait_status);
  } else {
    if (shell > 0) ::kill(-shell, SIGKILL);
    reply.clear();
    (void)read_until_eof(status_read.get(), reply, Clock::now() + Millis(1000), 64);
  }
  // Reaped here unless the main thread's loop did it first (then ECHILD): either is fine.
  while (::waitpid(middle, nullptr, 0) < 0 && errno == EINTR) {}
  if (!complete)
    return credential_failure(label + " ran longer than " + format_duration(timeout) +
                              " (--connect-timeout); it was killed");
  return password_from(label, wait_status, output);
}

Result<std::optional<std::string>> fetch_password(const PasswordSource& source, Millis timeout) {
  if (source.password) return source.password;
  if (source.file) {
    auto password = read_password_file(*source.file);
    if (!password) return password.failure();
    return std::optional<std::string>(std::move(*password));
  }
  if (source.command) {
    auto password = run_password_command(*source.command, timeout);
    if (!password) return password.failure();
    return std::optional<std::string>(std::move(*password));
  }
  return std::optional<std::string>{};
}

}  // namespace rlock
