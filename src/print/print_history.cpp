// history and check: a lock's runs, and whether one succeeded in time (or JSON).
#include <algorithm>

#include "print/print_json.h"
#include "print/print_text.h"
#include "util/byte_size.h"

namespace rlock {

namespace {

// " (attempt 4)": the run's last attempt under --retry, after others; "" for a run of one.
std::string attempts_text(const RunRecord& r) {
  return r.attempt > 1 ? " (attempt " + std::to_string(r.attempt) + ")" : "";
}

// "exit 3 on web-2 at 2026-11-30T02:00:05.120Z", the time by the server's clock.
std::string checked_run_text(const CheckedRun& r) {
  std::string out = result_text(r.record) + attempts_text(r.record) + " on " +
                    printable(r.record.holder.host) + " at " + server_time_text(r.ended_ms);
  return r.from_period ? out + " (this period's --once-per record)" : out;
}

// "in the last 25h (since ...)" or "in this period (2026-11-30, Europe/Berlin; since ...)".
std::string window_text(const CheckOptions& o, const CheckResult& r) {
  std::string since = "since " + server_time_text(r.window.start_ms);
  if (r.window.name.empty()) return "in the last " + printable(o.every_text) + " (" + since + ")";
  return "in this period (" + r.window.name + ", " + o.tz.value_or("UTC") + "; " + since + ")";
}

// ROWS as columns two spaces apart, each as wide as its widest cell, and at least as wide as
// WIDTH says (a page printed before); WIDTH is left with the widths used.
std::string columns(const std::vector<std::vector<std::string>>& rows, std::vector<size_t>& width) {
  width.resize(rows.front().size(), 0);
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i)
      line += i + 1 < row.size() ? row[i] + std::string(width[i] - row[i].size() + 2, ' ') : row[i];
    out += line + "\n";
  }
  return out;
}

std::string columns(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  return columns(rows, width);
}

std::vector<std::string> history_header() {
  return {"ACQUIRED AT", "HOST", "PID", "HELD", "WAITED", "CPU", "MAX RSS", "FENCE", "RESULT"};
}

// One run of history, a cell per column of history_header(); under --retry one attempt, with
// its own start and length (an older rlock's entry has only the run's: since and held_ms).
std::vector<std::string> history_row(const RunRecord& r) {
  // A skipped run (--record-skips) held nothing and drew no fence; an operator's action is no
  // run at all (a forced release names the fence of the run it broke).
  bool action = entry_kind(r.end) == EntryKind::action;
  bool held = r.fence > 0 && !action;
  bool own = r.attempt_span_known();
  bool waited = !action;
  bool cost = r.cpu_user_ms >= 0;
  std::string result = result_text(r);
  if (r.attempt > 0) result += ", attempt " + std::to_string(r.attempt);
  if (!r.period.empty()) result += "  " + printable(r.period);
  return {format_rfc3339(own ? r.attempt_since : r.holder.since),
          printable(r.holder.host),
          std::to_string(r.holder.pid),
          held && r.ended() ? format_duration(Millis(own ? r.attempt_held_ms : r.held_ms)) : "-",
          waited ? format_duration(Millis(r.waited_ms)) : "-",
          cost ? format_duration(Millis(r.cpu_user_ms + r.cpu_sys_ms)) : "-",
          cost ? format_byte_size(uint64_t(r.max_rss_kb) * 1024) : "-",
          r.fence > 0 ? std::to_string(r.fence) : "-",
          result};
}

// How RUNS runs of which FAILED failed and the others' ends are unknown read after a count:
// " run, failed", " runs, all failed", " runs: 2 failed, 1 end unknown" ...
std::string unsuccessful_text(int runs, int failed) {
  int unknown = runs - failed;
  if (unknown == 0) return runs == 1 ? " run, failed" : " runs, all failed";
  if (failed == 0) return runs == 1 ? " run, its end unknown" : " runs, their ends unknown";
  return " runs: " + std::to_string(failed) + " failed, " + std::to_string(unknown) +
         " end unknown";
}

// "; since then 2 failed: exit 3 on web-1 at ..., lost (76) on web-2 at ...": what an ok
// check would hide, the newest three named (runs whose end is unknown with them).
std::string failures_since_text(const CheckResult& r) {
  int failed = r.failures_since_count, n = failed + r.unknown_since_count;
  if (n == 0) return "";
  // Past the newest 10,000 entries the failures were not read, only the last success.
  std::string out = r.last_success ? "; since then " : "; ";
  out += (r.read_all ? "" : "at least ") + std::to_string(n);
  if (!r.last_success)
    out += unsuccessful_text(n, failed);
  else if (failed == n)
    out += " failed";
  else
    out += failed == 0 ? " end unknown" : " not successful (" + std::to_string(failed) +
                                              " failed, " + std::to_string(n - failed) +
                                              " end unknown)";
  out += ": ";
  for (size_t i = 0; i < std::min<size_t>(r.failures_since.size(), 3); ++i)
    out += (i ? ", " : "") + checked_run_text(r.failures_since[i]);
  return n > 3 ? out + ", ..." : out;
}

// The verdict: ok, or why not.
std::string check_verdict(const CheckOptions& o, const CheckResult& r, const OutputStyle& style) {
  if (r.paused()) {
    // No run is due while it lasts; what came before is said all the same.
    std::string out =
        paint(style, "33", pause_text(r.pause, r.pause_pttl)) + " (no run is due meanwhile)";
    if (r.last_success)
      out += ", last success " + server_time_text(r.last_success->ended_ms) + " on " +
             printable(r.last_success->record.holder.host);
    return out + failures_since_text(r);
  }
  if (r.slow()) {
    const CheckedRun& s = *r.last_success;
    return paint(style, "33", "slow") + ": the last success, " + server_time_text(s.ended_ms) +
           " on " + printable(s.record.holder.host) + ", took " +
           format_duration(Millis(s.record.held_ms)) + ", more than --slower-than " +
           format_duration(*r.slower_than);
  }
  if (r.ok()) {
    const CheckedRun& s = *r.last_success;
    std::string out =
        paint(style, "32", "ok") + ", last success " + server_time_text(s.ended_ms) + " on " +
        printable(s.record.holder.host) + " (exit 0 after " +
        format_duration(Millis(s.record.held_ms)) +
        (s.record.attempt > 1 ? ", attempt " + std::to_string(s.record.attempt) : "") + ")";
    if (s.from_period) out += " (this period's --once-per record)";
    return out + failures_since_text(r);
  }
  if (r.entries_read == 0 && !r.last_run)
    return "no run recorded (history is written by rlock run; --history-length 0 disables it)";
  if (r.runs_in_window == 0) return "no run " + window_text(o, r);
  return "no successful run " + window_text(o, r) + ": " + (r.read_all ? "" : "at least ") +
         std::to_string(r.runs_in_window) +
         unsuccessful_text(r.runs_in_window, r.failures_in_window);
}

// After the verdict of a check that failed: the last run, and the last success.
std::string check_failure(const CheckResult& r) {
  std::string out;
  if (r.last_run) out += "; last: " + checked_run_text(*r.last_run);
  if (r.last_success && r.last_success->ended_ms != r.last_run->ended_ms)
    out += "; last success " + server_time_text(r.last_success->ended_ms) + " on " +
           printable(r.last_success->record.holder.host);
  else if (!r.last_success && r.last_run)
    out += r.read_all ? "; no success in its history"
                      : "; no success among its newest " + std::to_string(r.entries_read) +
                            " entries, and none kept beside them";
  return out;
}

}  // namespace

void print_history(const std::string& key, const std::vector<RunRecord>& runs,
                   const OutputStyle& style) {
  if (style.json) {
    write_stdout(history_json(key, runs));
    return;
  }
  std::vector<std::vector<std::string>> rows{history_header()};
  for (const auto& r : runs) rows.push_back(history_row(r));
  write_stdout(columns(rows));
}

void HistoryPrinter::print(const std::vector<RunRecord>& runs) {
  std::string out;
  if (style_.json) {
    // {"key": ..., "runs": [...]} as one document, each run an element of the array.
    for (const RunRecord& r : runs) {
      out += printed_ ? ",\n" : history_head_json(key_);
      printed_ = true;
      out += history_run_json(r);
    }
    write_stdout(out);
    return;
  }
  std::vector<std::vector<std::string>> rows;
  if (!printed_) rows.push_back(history_header());
  for (const RunRecord& r : runs) rows.push_back(history_row(r));
  printed_ = true;
  write_stdout(columns(rows, widths_));
}

void HistoryPrinter::finish() {
  if (style_.json) {
    write_stdout(printed_ ? history_tail_json() : history_json(key_, {}));
  } else if (!printed_) {
    write_stdout(columns({history_header()}));
  }
}

void print_check(const CheckOptions& o, const CheckResult& r, const OutputStyle& style) {
  if (style.json) {
    write_stdout(check_json(o, r));
    return;
  }
  std::string line = printable_key(o.key) + ": " + check_verdict(o, r, style);
  if (!r.ok()) line += check_failure(r);
  for (size_t i = 0; i < r.running.size(); ++i)
    line += (i ? ", " : "; running now on ") + printable(r.running[i].host) + " pid " +
            std::to_string(r.running[i].pid) + " since " + format_rfc3339(r.running[i].since);
  if (!r.unanswered.empty()) {
    line += "; no answer from";
    for (const std::string& node : r.unanswered) line += " " + printable(node);
  }
  write_stdout(line + "\n");
}

}  // namespace rlock
