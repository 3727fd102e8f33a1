#include "print/print_phase.h"

#include "print/print.h"
#include "util/duration.h"

namespace rlock {

namespace {

// "in 7s", or "due 1.2s ago" once past.
std::string due_text(Millis due_in) {
  return due_in.count() > 0 ? "in " + format_duration(due_in)
                            : "due " + format_duration(-due_in) + " ago";
}

std::string stopping_text(const PhaseView& p) {
  const RunPhase& r = p.phase;
  std::string out = r.why == "leftovers" ? "stopping its leftovers"
                    : r.why == "stopped" || r.why.empty()
                        ? "stopping"
                        : "stopping (" + printable(r.why, 20) + ")";
  out += ": SIG" + printable(r.signal, 20) + " sent " + format_duration(p.ago) + " ago";
  if (!r.by.empty()) out += " by " + printable(r.by);
  if (!r.reason.empty()) out += " (" + printable(r.reason, 120) + ")";
  if (r.signal != "KILL") out += ", SIGKILL " + due_text(p.due_in);
  return out;
}

}  // namespace

std::string phase_text(const PhaseView& p) {
  const RunPhase& r = p.phase;
  switch (r.kind) {
  case RunPhase::Kind::running: return "running";
  case RunPhase::Kind::stopping: return stopping_text(p);
  case RunPhase::Kind::retrying: {
    std::string out = "retrying: attempt " + std::to_string(r.attempt) + " of " +
                      std::to_string(r.attempts) + " " + due_text(p.due_in);
    if (r.last_status)
      out += ", attempt " + std::to_string(r.attempt - 1) + " exited " +
             std::to_string(*r.last_status);
    return out;
  }
  }
  return "";
}

}  // namespace rlock
