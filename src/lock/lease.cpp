#include "lock/lease.h"

#include <fcntl.h>
#include <unistd.h>

#include <utility>

#include "lock/lock.h"
#include "util/background_thread.h"
#include "util/error.h"
#include "util/log.h"
#include "util/resources.h"

namespace rlock {

Millis smallest_ttl_riding(Millis window, std::optional<Millis> kill_after) {
  // A kill-after of ttl/2 or more is refused (kill_after_allowed): with one given, the ttl
  // grows until it is allowed too.
  // Past a day it stops counting: no setting of a server asks for a longer ttl in earnest.
  for (Millis ttl{1000}; ttl < Millis(24LL * 3600 * 1000); ttl += Millis(1000)) {
    Millis kill = kill_after.value_or(default_kill_after(ttl));
    if (kill_after_allowed(kill, ttl) && outage_ridden(ttl, kill) >= window) return ttl;
  }
  return Millis(24LL * 3600 * 1000);
}

namespace {

PhaseUpdate phase_only(PhaseUpdate::Op op) {
  PhaseUpdate update;
  update.op = op;
  return update;
}

}  // namespace

Renewals::Renewals(Lock& lock, Millis ttl, TimePoint acquire_sent, Observer on_renewed)
    : lock_(lock), ttl_(ttl), on_renewed_(std::move(on_renewed)),
      deadline_(lease_deadline(acquire_sent, ttl).time_since_epoch().count()),
      next_renewal_(acquire_sent + renew_interval(ttl)) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
    throw system_call_error("cannot start the renewal thread", "pipe2");
  wake_read_.reset(p[0]);
  wake_write_.reset(p[1]);
}

Renewals::~Renewals() { stop(); }

void Renewals::start() {
  AllSignalsBlocked blocked;  // rlock's signals are the main thread's
  thread_ = std::thread([this] { run(); });
}

void Renewals::stop() {
  {
    std::lock_guard<std::mutex> guard(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Renewals::set_phase(const RunPhase& phase) {
  {
    std::lock_guard<std::mutex> guard(mu_);
    // Running, and never anything else: nothing to say.
    if (phase.kind == RunPhase::Kind::running && phase_generation_ == 0) return false;
    phase_ = phase;
    ++phase_generation_;
    phase_changed_ = true;
  }
  cv_.notify_all();
  return true;
}

// What the renewal sent at SENT says of the phase: the newest when it was not sent yet (its
// GENERATION, for phase_sent()), else kept alive while it is not running.
PhaseUpdate Renewals::phase_update(TimePoint sent, uint64_t& generation) {
  std::lock_guard<std::mutex> guard(mu_);
  generation = phase_generation_;
  if (phase_generation_ == phase_sent_)
    return phase_only(phase_kept_ ? PhaseUpdate::Op::keep : PhaseUpdate::Op::none);
  if (phase_.kind == RunPhase::Kind::running) return phase_only(PhaseUpdate::Op::clear);
  auto ms = [](TimePoint::duration d) { return std::chrono::duration_cast<Millis>(d); };
  return {PhaseUpdate::Op::set, encode_run_phase(phase_), ms(sent - phase_.since),
          ms(phase_.due - sent)};
}

void Renewals::phase_sent(uint64_t generation) {
  std::lock_guard<std::mutex> guard(mu_);
  if (generation == phase_sent_) return;
  phase_sent_ = generation;
  // When GENERATION is the newest, phase_ is what it sent; else the next renewal sends anew.
  phase_kept_ = phase_.kind != RunPhase::Kind::running;
}

void Renewals::drain_wakeups() {
  char buf[64];
  while (::read(wake_read_.get(), buf, sizeof buf) > 0) {}
}

void Renewals::notify() {
  char c = 1;
  // A full pipe already holds a wake-up; nothing is lost by dropping this one.
  [[maybe_unused]] ssize_t n = ::write(wake_write_.get(), &c, 1);
}

void Renewals::lose(State why) {
  state_ = static_cast<int>(why);
  notify();
}

// The renewal sent at SENT was applied, after FAILURES_IN_ROW that were not.
void Renewals::confirm(TimePoint sent, int64_t failures_in_row) {
  // From when the renewal was sent, not when its reply came: the server may have applied it at
  // once, and the key expires a ttl after that.
  TimePoint confirmed = lease_deadline(sent, ttl_);
  deadline_ = confirmed.time_since_epoch().count();
  if (on_renewed_) on_renewed_(confirmed);
  ++renewals_;
  // Debug only: the warning said there was trouble, and cron mails every line.
  if (failures_in_row > 0)
    log(Level::debug,
        {"renewal_recovered",
         lock_.key(),
         "renewal recovered after " + std::to_string(failures_in_row) + " failed attempt(s)",
         {{"failed_attempts", failures_in_row}}});
  else
    log(Level::debug, {"renewed", lock_.key(), "renewed"});
}

void Renewals::run() {
  TimePoint next = next_renewal_;
  int64_t failures_in_row = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> guard(mu_);
      // A new phase is renewed with at once: status shows it within a round trip.
      cv_.wait_until(guard, next, [this] { return stopping_ || phase_changed_; });
      if (stopping_) return;
      phase_changed_ = false;
    }
    TimePoint sent = Clock::now();
    TimePoint deadline = this->deadline();
    if (sent >= deadline) {
      // We slept (or were frozen) past the deadline: another client may hold the key by now,
      // and a late renewal cannot make the time in between safe. The lease is over.
      lose(State::expired);
      return;
    }
    Millis attempt = std::min(renew_attempt_timeout(ttl_), lock_.command_timeout());
    TimePoint attempt_deadline = std::min(sent + attempt, deadline);
    uint64_t generation = 0;
    PhaseUpdate phase = phase_update(sent, generation);
    auto renewed = lock_.renew(ttl_, attempt_deadline, phase);
    // A connection that broke under us (closed by the server or a proxy just as we sent) gets
    // one more try on a new one before anyone hears of it; renewing twice is harmless.
    if (!renewed && renewed.failure().kind == Failure::Kind::io && failures_in_row == 0 &&
        Clock::now() < attempt_deadline)
      renewed = lock_.renew(ttl_, attempt_deadline, phase);
    if (renewed && *renewed) {
      confirm(sent, failures_in_row);
      phase_sent(generation);
      failures_in_row = 0;
      next = sent + renew_interval(ttl_);
      notify();
    } else if (renewed) {
      lose(State::not_mine);
      return;
    } else {
      ++failures_;
      // One line when trouble starts, then one a few seconds apart, not one per retry.
      if (failures_in_row % 10 == 0) {
        auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
        log(Level::warning, {"renewal_failed",
                             lock_.key(),
                             "renewal failed (" + renewed.failure().message +
                                 "); lease valid for " + format_duration(left) + " more, retrying",
                             {{"lease_left_ms", left.count()}}});
      }
      ++failures_in_row;
      next = std::min(Clock::now() + renew_retry_interval(ttl_), deadline);
    }
  }
}

LossVerdict judge_lease(Renewals::State state, TimePoint deadline, TimePoint now, Millis kill_after,
                        bool ignore_loss) {
  using Act = LossVerdict::Act;
  using Why = LossVerdict::Why;
  if (state == Renewals::State::held && now < loss_threshold(deadline, kill_after, ignore_loss))
    return {};
  Why why = state == Renewals::State::expired || now >= deadline ? Why::ran_out
            : state == Renewals::State::not_mine                 ? Why::not_ours
                                                                 : Why::unreachable;
  if (ignore_loss) return {Act::ignore, why, {}};
  if (why == Why::ran_out) return {Act::kill_now, why, now};
  if (why == Why::not_ours) return {Act::stop, why, std::min(now + kill_after, deadline)};
  return {Act::stop, why, deadline};
}

}  // namespace rlock
