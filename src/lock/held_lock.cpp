#include "lock/held_lock.h"

#include <algorithm>

#include "redis/retry.h"
#include "util/log.h"

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

bool send_history(Redis& redis, const std::string& key, const ScriptCall& entry,
                  std::optional<Millis> budget) {
  TimePoint give_up = Clock::now() + budget.value_or(redis.command_timeout());
  ScriptCall call = entry;
  auto sent = resend_until(give_up, [&] {
    TimePoint deadline = std::min(Clock::now() + redis.command_timeout(), give_up);
    auto result = eval(redis, call, deadline);
    call.with_source = true;  // sent again, if at all, with its source (ScriptCall)
    return result;
  });
  if (sent) return true;
  if (may_have_run(sent.failure())) {  // a frozen server runs it when it wakes
    log_warning(key + ": the run's history entry may not have been recorded (" +
                sent.failure().message + ")");
    return true;
  }
  warn_history(key, sent.failure().message);
  return false;
}

bool HeldLock::release(std::optional<ScriptCall>* history, Millis budget) {
  done_ = true;
  // No end of the run rides along: the run's start entry goes instead (forget_start).
  std::optional<ScriptCall> forget = forget_;
  if (!history || !*history) history = &forget;
  Resend tries(Clock::now() + std::min(ttl_, budget));
  for (;;) {
    TimePoint deadline = std::min(Clock::now() + lock_.command_timeout(), tries.give_up());
    std::vector<Reply> then;
    auto released =
        history && *history ? lock_.release(deadline, {**history}, &then) : lock_.release(deadline);
    if (!then.empty()) {
      const ScriptCall& entry = **history;
      if (then.front().type == Reply::Type::error)
        warn_history(
            lock_.key(),
            script_failure(lock_.redis(), *entry.script, entry.keys, then.front().str).message);
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
    if (history && *history) (*history)->with_source = true;  // sent again: ScriptCall
    if (!tries.again(released.failure())) {
      log(Level::warning, {"release_failed", lock_.key(),
                           "could not release (" + released.failure().message +
                               "); it expires within " + format_duration(ttl_)});
      return released.failure().kind == Failure::Kind::server;
    }
  }
}

bool HeldLock::give_back(std::optional<Millis> min_hold, std::optional<ScriptCall>* history,
                      Millis budget) {
  if (min_hold) {
    auto held = std::chrono::duration_cast<Millis>(Clock::now() - acquired_);
    if (held < *min_hold) {
      Millis rest = *min_hold - held;
      // The run is over: its phase, if it had one, goes (cleared with the renewal).
      PhaseUpdate over;
      over.op = PhaseUpdate::Op::clear;
      auto kept = lock_.renew(rest, Clock::now() + lock_.command_timeout(), over);
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
