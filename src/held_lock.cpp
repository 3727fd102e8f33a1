#include "held_lock.h"

#include <poll.h>

#include <algorithm>

#include "log.h"
#include "wait.h"

namespace rlock {

HeldLock::~HeldLock() {
  if (done_) return;
  try {
    release();
  } catch (...) {
    // Out of memory while logging: the lock expires within its ttl.
  }
}

void warn_history(const std::string& key, const std::string& why) {
  log_warning(key + ": could not record the run in its history (" + why + ")");
}

void send_history(Redis& redis, const std::string& key, const std::vector<Argv>& commands,
                  std::optional<Millis> budget) {
  auto done = redis.pipeline(commands, Clock::now() + budget.value_or(redis.command_timeout()));
  if (!done) return warn_history(key, done.failure().message);
  for (const Reply& reply : *done)
    if (reply.type == Reply::Type::error)
      return warn_history(key, redis.server_failure(reply.str).message);
}

bool HeldLock::release(std::optional<std::vector<Argv>>* history, Millis budget) {
  done_ = true;
  TimePoint give_up = Clock::now() + std::min(ttl_, budget);
  for (;;) {
    TimePoint deadline = std::min(Clock::now() + lock_.command_timeout(), give_up);
    std::vector<Reply> then;
    auto released =
        history && *history ? lock_.release(deadline, **history, &then) : lock_.release(deadline);
    if (!then.empty()) {
      auto error = std::find_if(then.begin(), then.end(),
                                [](const Reply& r) { return r.type == Reply::Type::error; });
      if (error != then.end())
        warn_history(lock_.key(), lock_.redis().server_failure(error->str).message);
      history->reset();
    } else if (history && *history && !released && may_have_run(released.failure())) {
      // The entry may be written (a frozen server runs it when it wakes): at most once.
      log_warning(lock_.key() + ": the run's history entry may not have been recorded (" +
                  released.failure().message + "); not sent again, lest it be recorded twice");
      history->reset();
    }
    if (released) {
      if (*released)
        log(Level::debug, {"released", lock_.key(), "released"});
      else if (!lost_)
        log(Level::warning, {"not_ours_at_release", lock_.key(),
                             "the lock was no longer ours at release (it expired or was "
                             "taken); the run may have overlapped another"});
      return true;
    }
    Failure::Kind kind = released.failure().kind;
    if (kind == Failure::Kind::server || kind == Failure::Kind::connect ||
        Clock::now() >= give_up) {
      log(Level::warning, {"release_failed", lock_.key(),
                           "could not release (" + released.failure().message +
                               "); it expires within " + format_duration(ttl_)});
      return kind == Failure::Kind::server;
    }
    ::poll(nullptr, 0, static_cast<int>(k_retry_interval.count()));
  }
}

bool HeldLock::finish(std::optional<Millis> min_hold, std::optional<std::vector<Argv>>* history,
                      Millis budget) {
  if (min_hold) {
    auto held = std::chrono::duration_cast<Millis>(Clock::now() - acquired_);
    if (held < *min_hold) {
      Millis rest = *min_hold - held;
      auto kept = lock_.renew(rest, Clock::now() + lock_.command_timeout());
      if (kept && *kept) {
        log(Level::debug, {"kept_for_min_hold",
                           lock_.key(),
                           "keeping it " + format_duration(rest) + " more (--min-hold)",
                           {{"ms", rest.count()}}});
        done_ = true;
        return true;
      }
    }
  }
  return release(history, budget);
}

}  // namespace rlock
