#include "verbs/verbs.h"

#include "lock_value.h"
#include "log.h"

namespace rlock {

int unavailable(const Failure& failure) {
  log_error(failure.message);
  return k_exit_unavailable;
}

void check_token(const std::string& token) {
  if (!is_token(token))
    throw usage_error("--token: '" + token + "' is not an rlock token (32 hex digits)");
}

}  // namespace rlock
