// A holder's run's phase in words (status, inspect): what it is doing when not simply running.
#pragma once

#include <string>

#include "print/lock_view.h"

namespace rlock {

// "stopping: SIGTERM sent 3s ago by alice@ops-1 (db maintenance), SIGKILL in 27s",
// "stopping (max-run): ...", "retrying: attempt 2 of 4 in 10s, attempt 1 exited 1".
std::string phase_text(const PhaseView& p);

}  // namespace rlock
