#include "redis/retry.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <random>

namespace rlock {

bool may_have_run(const Failure& failure) {
  return failure.kind != Failure::Kind::connect && failure.kind != Failure::Kind::server;
}

bool dropped(const Failure& failure) { return failure.kind == Failure::Kind::io; }

bool Resend::again(const Failure& failure) {
  if ((!may_have_run(failure) && !worth_retrying(failure)) || Clock::now() >= give_up_)
    return false;
  bool at_once = first_ && dropped(failure);
  first_ = false;
  if (!at_once) {
    Millis left = std::chrono::duration_cast<Millis>(give_up_ - Clock::now());
    ::poll(nullptr, 0, static_cast<int>(std::min(k_retry_interval, left).count()));
  }
  return true;
}

Backoff::Backoff()
    : random_state_(static_cast<unsigned>(::getpid()) ^
                    static_cast<unsigned>(Clock::now().time_since_epoch().count())) {}

Millis Backoff::next() {
  std::minstd_rand random(random_state_);
  std::uniform_int_distribution<int64_t> jitter(0, step_.count() / 2);
  Millis pause = step_ / 2 + Millis(jitter(random));
  random_state_ = static_cast<unsigned>(random());
  step_ = std::min(step_ * 2, k_backoff_cap);
  return pause;
}

bool worth_retrying(const Failure& failure) {
  switch (failure.why) {
  case Failure::Why::too_few_replicas:  // replicas catch up after a failover, a restart
  case Failure::Why::unknown_primary:   // Sentinel may not know it yet
  case Failure::Why::late:              // a Redlock node slower than the quorum
    return true;
  case Failure::Why::tls_refused:
  case Failure::Why::refused_command:
  case Failure::Why::out_of_resources: return false;
  case Failure::Why::closed:
  case Failure::Why::none: break;
  }
  switch (failure.kind) {
  case Failure::Kind::connect:
  case Failure::Kind::io:
  case Failure::Kind::timeout: return true;
  case Failure::Kind::server:
    // Loading its data after a restart; a replica cut off from its primary; a Cluster
    // resharding or without a quorum; a primary demoted by a failover we have not followed yet;
    // a script running past lua-time-limit; a blocked read (XREAD BLOCK) let go as its server
    // became a replica.
    for (const char* code :
         {"LOADING", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "READONLY", "BUSY", "UNBLOCKED"})
      if (failure.code == code) return true;
    return false;
  case Failure::Kind::protocol:
  case Failure::Kind::interrupted: return false;
  }
  return false;
}

}  // namespace rlock
