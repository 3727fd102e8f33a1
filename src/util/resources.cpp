#include "util/resources.h"

#include <sys/resource.h>

#include <cstring>

namespace rlock {

namespace {

// " (ulimit -n 4)": the soft limit RESOURCE sets, as the shell's FLAG shows it; "" when none.
std::string limit_of(int resource, const char* flag) {
  rlimit limit{};
  if (::getrlimit(resource, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return "";
  return std::string(" (ulimit ") + flag + " " + std::to_string(limit.rlim_cur) + ")";
}

}  // namespace

std::optional<std::string> shortage(int err, Call call) {
  switch (err) {
  case EMFILE: return "out of file descriptors" + limit_of(RLIMIT_NOFILE, "-n");
  case ENFILE: return std::string("the system is out of file descriptors (fs.file-max)");
  case ENOMEM: return "out of memory" + limit_of(RLIMIT_AS, "-v");
  case EAGAIN:
    if (call != Call::spawning) return std::nullopt;
    return "out of processes" + limit_of(RLIMIT_NPROC, "-u");
  default: return std::nullopt;
  }
}

std::string system_call_message(const std::string& doing, const std::string& syscall, int err,
                                Call call) {
  std::string what = syscall + ": " + std::strerror(err);
  auto out = shortage(err, call);
  if (!out) return doing + ": " + what;
  // The limit and the call inside one pair of parentheses.
  if (out->back() == ')') return doing + ": " + out->substr(0, out->size() - 1) + "; " + what + ")";
  return doing + ": " + *out + " (" + what + ")";
}

Error system_call_error(const std::string& doing, const std::string& syscall, int err, Call call) {
  return Error(k_exit_internal, system_call_message(doing, syscall, err, call));
}

Failure system_call_failure(const std::string& doing, const std::string& syscall, int err,
                            Call call) {
  return Failure{Failure::Kind::connect, system_call_message(doing, syscall, err, call), "",
                 shortage(err, call) ? Failure::Why::out_of_resources : Failure::Why::none};
}

}  // namespace rlock
