#include "print/print_text.h"

#include <algorithm>
#include <chrono>

namespace rlock {

WallTime now_wall() {
  return std::chrono::time_point_cast<Millis>(std::chrono::system_clock::now());
}

std::string paint(const OutputStyle& style, const char* ansi, const std::string& text) {
  if (!style.color) return text;
  return std::string("\033[") + ansi + "m" + text + "\033[0m";
}

std::string server_time_text(int64_t ms) { return format_rfc3339(WallTime(Millis(ms))); }

std::string ttl_text(Millis pttl) {
  return pttl.count() < 0 ? "no ttl" : "ttl " + format_duration(pttl);
}

std::string holder_text(const Holder& h) {
  std::string out = printable(h.host) + " pid " + std::to_string(h.pid);
  if (!h.cmd.empty()) out += " (" + printable(h.cmd) + ")";
  return out;
}

std::string last_output_text(const HolderView& h) {
  return h.last_output ? "last output " + format_duration(h.last_output_ago) + " ago" : "";
}

std::string expiry_text(Millis pttl, const std::string& what) {
  return pttl.count() >= 0 ? what + " expires in " + format_duration(pttl)
                           : what + " never expires";
}

std::string gone_text(const HolderView& h, Millis pttl, const std::string& what) {
  switch (h.liveness) {
  case Liveness::gone:
    return (h.who.group ? "holder process and its process group gone; " : "holder process gone; ") +
           expiry_text(pttl, what);
  case Liveness::group_running:
    return "pid gone, its process group still runs: its keeper renews " + what +
           " until the group ends";
  case Liveness::other_pid_namespace:
    // Said wherever the pid is, lest an operator take it for the process of that pid here.
    return "pid " + std::to_string(h.who.pid) +
           " is in another PID namespace than this rlock's (a container's, or the host's seen "
           "from one), not pid " +
           std::to_string(h.who.pid) + " here; whether it runs cannot be told from here";
  case Liveness::unknown:
  case Liveness::running: return "";
  }
  return "";
}

namespace {

std::string broken_whose(const HolderView& h) {
  return h.token.empty() ? "another client" : holder_text(h.who);
}

// "broken by alice@ops-1 3s ago; free once it has stopped, in 8.2s at the latest"
std::string breaker_text(const HolderView& h, Millis ttl) {
  std::string why = h.broken->reason.empty() ? "" : " (" + printable(h.broken->reason, 120) + ")";
  return "broken by " + printable(h.broken->by) + " " + format_duration(h.broken_ago) + " ago" +
         why + "; free once it has stopped, in " + format_duration(std::max(Millis(0), ttl)) +
         " at the latest";
}

}  // namespace

std::string broken_text(const HolderView& h, Millis ttl) {
  return broken_whose(h) + (h.token.empty() ? "'s lock" : "") + " was " + breaker_text(h, ttl);
}

std::string broken_holder_text(const HolderView& h, Millis ttl) {
  return broken_whose(h) + ", " + breaker_text(h, ttl);
}

std::string action_by(const RunRecord& r) {
  // Entries of an rlock before actions named who: a reset's user only. A pause says until when.
  return printable(r.by.empty() ? r.holder.user : r.by) +
         (r.until.empty() ? "" : " until " + printable(r.until)) +
         (r.reason.empty() ? "" : ": " + printable(r.reason, 120));
}

namespace {

// An operator's action in the history: "resumed by alice@ops-1: the database is back".
std::string action_text(const RunRecord& r) {
  if (r.end == run_end_name(RunEnd::pause)) return "paused by " + action_by(r);
  if (r.end == run_end_name(RunEnd::resume)) return "resumed by " + action_by(r);
  if (r.end == run_end_name(RunEnd::forced_release)) return "released by force by " + action_by(r);
  return "period reset by " + action_by(r);
}

}  // namespace

std::string result_text(const RunRecord& r) {
  if (r.end == run_end_name(RunEnd::exited)) return "exit " + std::to_string(r.exit_status);
  if (entry_kind(r.end) == EntryKind::action) return action_text(r);
  // A run's start entry (history.h): it holds the lock, or its rlock died before its end.
  if (r.end == run_end_name(RunEnd::running)) return "running";
  if (r.end == run_end_name(RunEnd::unknown)) return "end unknown";
  // Another host's words: escaped, and not so long that they hide the rest of the line.
  if (!r.by.empty())
    return printable(r.end) + " by " + printable(r.by) +
           (r.reason.empty() ? "" : ": " + printable(r.reason, 120)) + " (" +
           std::to_string(r.exit_status) + ")";
  return printable(r.end) + " (" + std::to_string(r.exit_status) + ")";
}

std::string last_run_text(const RunRecord& r, Millis ago) {
  return result_text(r) + " on " + printable(r.holder.host) + ", " + format_duration(ago) + " ago";
}

std::string labelled_rows(const std::vector<std::pair<std::string, std::string>>& rows,
                          size_t width) {
  std::string out;
  for (const auto& [label, value] : rows)
    out += label + std::string(label.size() < width ? width - label.size() : 1, ' ') + value + "\n";
  return out;
}

}  // namespace rlock
