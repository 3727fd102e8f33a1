// acquire --while-pid PID: the detached keeper that holds the lock while PID lives (keeper.cpp
// says how).
#pragma once

#include "run/wait.h"
#include "settings/options.h"

namespace rlock {

class Fd;
class Lock;
class PidWatch;
class SignalEvents;

// acquire --while-pid : forks the detached keeper that holds GOT for as long as
// PID lives, told of a release through LINK, and of rlock stop through a connection of its own
// to GLOBAL's Redis. False when the fork failed.
bool start_keeper(Lock& lock, const Obtained& got, const RunOptions& options, const PidWatch& pid,
                  const Fd& link, SignalEvents& signals, const GlobalOptions& global);

}  // namespace rlock
