#include "output.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "error.h"
#include "fd.h"
#include "lock_value.h"
#include "text.h"

namespace rlock {

namespace {

using nlohmann::json;

WallTime now_wall() {
  return std::chrono::time_point_cast<Millis>(std::chrono::system_clock::now());
}

const char* state_name(LockState::Kind kind) {
  switch (kind) {
  case LockState::Kind::free: return "free";
  case LockState::Kind::held: return "held";
  case LockState::Kind::broken: return "broken";
  case LockState::Kind::foreign: return "foreign";
  case LockState::Kind::semaphore: return "semaphore";
  case LockState::Kind::shared: return "shared";
  case LockState::Kind::not_a_lock: return "not_a_lock";
  }
  return "";
}

std::string paint(const OutputStyle& style, const char* ansi, const std::string& text) {
  if (!style.color) return text;
  return std::string("\033[") + ansi + "m" + text + "\033[0m";
}

std::string ttl_text(Millis pttl) {
  return pttl.count() < 0 ? "no ttl" : "ttl " + format_duration(pttl);
}

// "web-2 pid 4121 (report.sh)"
std::string holder_text(const Holder& h) {
  std::string out = printable(h.host) + " pid " + std::to_string(h.pid);
  if (!h.cmd.empty()) out += " (" + printable(h.cmd) + ")";
  return out;
}

json holder_json(const Holder& h) {
  return {{"host", h.host}, {"pid", h.pid}, {"user", h.user}, {"command", h.cmd}};
}

// Whether the holder still runs, as told on its own host: true while the lock is in use (its
// process, or for a group's lock a process of its group), false once it is left over; null
// when that cannot be told.
json alive_json(Liveness liveness) {
  switch (liveness) {
  case Liveness::unknown:
  case Liveness::other_pid_namespace: return nullptr;
  case Liveness::running:
  case Liveness::group_running: return true;
  case Liveness::gone: return false;
  }
  return nullptr;
}

// "running", "group_running", "gone", "other_pid_namespace" (cannot be told from here); null
// when that cannot be told for another reason (another host).
json liveness_json(Liveness liveness) {
  switch (liveness) {
  case Liveness::unknown: return nullptr;
  case Liveness::other_pid_namespace: return "other_pid_namespace";
  case Liveness::running: return "running";
  case Liveness::group_running: return "group_running";
  case Liveness::gone: return "gone";
  }
  return nullptr;
}

// Sets "holder_alive" and "holder_liveness" of J for holder H.
void set_liveness(json& j, const Holder& h) {
  Liveness liveness = holder_liveness(h);
  j["holder_alive"] = alive_json(liveness);
  j["holder_liveness"] = liveness_json(liveness);
}

// WHAT is "the lock", or "its place" for a holder of a semaphore or a shared lock, whose place
// alone ends with it.
std::string expiry_text(Millis pttl, const std::string& what = "the lock") {
  return pttl.count() >= 0 ? what + " expires in " + format_duration(pttl)
                           : what + " never expires";
}

// What an operator at 3 a.m. needs to know of a holder on this host whose pid is gone: whether
// the lock (or its place: WHAT) is left over, staying until its ttl runs out, or still in use
// by the process group it is held for (its keeper renews it: waiting for the ttl would be in
// vain). "" otherwise.
std::string gone_text(const Holder& h, Liveness liveness, Millis pttl,
                      const std::string& what = "the lock") {
  switch (liveness) {
  case Liveness::gone:
    return (h.group ? "holder process and its process group gone; " : "holder process gone; ") +
           expiry_text(pttl, what);
  case Liveness::group_running:
    return "pid gone, its process group still runs: its keeper renews " + what +
           " until the group ends";
  case Liveness::unknown:
  case Liveness::other_pid_namespace:
  case Liveness::running: return "";
  }
  return "";
}

// inspect's "holder alive" row.
std::string alive_text(const Holder& h, Liveness liveness, Millis pttl) {
  switch (liveness) {
  case Liveness::unknown: return "unknown (not this host)";
  case Liveness::other_pid_namespace:
    return "unknown (another PID namespace on this host, such as a container: its pid "
           "means another process here)";
  case Liveness::running:
    return h.group ? "yes, held for its process group until the last of it exits" : "yes";
  case Liveness::group_running:
    return "yes, its process group: pid " + std::to_string(h.pid) +
           " is gone, the group still runs; its keeper renews the lock until the group ends";
  case Liveness::gone:
    return (h.group ? "no, the process and its process group are gone; "
                    : "no, the process is gone; ") +
           expiry_text(pttl);
  }
  return "";
}

json run_json(const RunRecord& r) {
  return {{"id", r.id},
          {"holder", holder_json(r.holder)},
          {"acquired_at", format_rfc3339(r.holder.since)},
          {"fence", r.fence},
          {"waited_ms", r.waited_ms},
          {"held_ms", r.held_ms},
          {"exit_status", r.exit_status},
          {"end", r.end},
          {"period", r.period.empty() ? json(nullptr) : json(r.period)}};
}

// "exit 0", "exit 3", "signalled (143)", "lost (76)", "busy (75)" ...
std::string result_text(const RunRecord& r) {
  if (r.end == run_end_name(RunEnd::exited)) return "exit " + std::to_string(r.exit_status);
  if (r.end == run_end_name(RunEnd::period_reset))
    return "period reset by " + printable(r.holder.user);
  return printable(r.end) + " (" + std::to_string(r.exit_status) + ")";
}

// "exit 0 on web-2, 3h ago": how long ago the run ended.
std::string last_run_text(const RunRecord& r) {
  WallTime ended = r.holder.since + Millis(r.held_ms);
  return result_text(r) + " on " + printable(r.holder.host) + ", " +
         format_duration(std::max(Millis(0), now_wall() - ended)) + " ago";
}

// A tombstone's "broken": {"by", "at"}; null for a lock that was not broken.
json broken_json(const LockValue& v) {
  if (!v.broken) return nullptr;
  return {{"by", v.broken->by}, {"at", format_rfc3339(v.broken->at)}};
}

// The places of a semaphore or a shared lock, one object each.
json places_json(const std::vector<SemaphoreHolder>& places) {
  json holders = json::array();
  for (const auto& h : places) {
    json one = {{"token", h.token},      {"ttl_ms", h.ttl.count()}, {"value", h.raw},
                {"holder", nullptr},     {"holder_alive", nullptr}, {"fence", nullptr},
                {"acquired_at", nullptr}};
    one["holder_liveness"] = nullptr;
    if (h.value) {
      one["holder"] = holder_json(h.value->holder);
      set_liveness(one, h.value->holder);
      if (h.value->fence) one["fence"] = *h.value->fence;
      one["acquired_at"] = format_rfc3339(h.value->holder.since);
    }
    one["broken"] = h.value ? broken_json(*h.value) : json(nullptr);
    holders.push_back(one);
  }
  return holders;
}

// What is known of a place's holder on this host whose pid is gone (gone_text()), or "".
std::string place_gone_text(const SemaphoreHolder& h) {
  if (!h.value || h.value->broken) return "";
  const Holder& holder = h.value->holder;
  return gone_text(holder, holder_liveness(holder), h.ttl, "its place");
}

// "another client", "broken (...)" or "web-2 pid 4121 (report.sh)", with "[holder process
// gone; its place expires in 28.1s]" after a holder that is gone: one place of a semaphore or a
// shared lock, in a status line.
std::string place_text(const SemaphoreHolder& h) {
  if (!h.value) return "another client";
  if (h.value->broken) return "broken (" + broken_text(*h.value, h.ttl) + ")";
  std::string gone = place_gone_text(h);
  return holder_text(h.value->holder) + (gone.empty() ? "" : " [" + gone + "]");
}

// One lock as a JSON object; field names are documented in rlock(1), JSON OUTPUT.
json lock_json(const LockState& s, bool with_counter) {
  json j;
  j["key"] = s.key;
  j["state"] = state_name(s.kind);
  if (s.kind == LockState::Kind::not_a_lock) j["type"] = s.type;
  bool has_value = s.kind == LockState::Kind::held || s.kind == LockState::Kind::broken ||
                   s.kind == LockState::Kind::foreign;
  j["value"] = has_value ? json(s.raw) : json(nullptr);
  j["ttl_ms"] = has_value && s.pttl.count() >= 0 ? json(s.pttl.count()) : json(nullptr);
  j["holder"] = nullptr;
  j["holder_alive"] = nullptr;
  j["holder_liveness"] = nullptr;
  j["token"] = nullptr;
  j["fence"] = nullptr;
  j["acquired_at"] = nullptr;
  j["held_ms"] = nullptr;
  j["broken"] = s.value ? broken_json(*s.value) : json(nullptr);
  if (s.value) {
    const Holder& h = s.value->holder;
    j["holder"] = holder_json(h);
    set_liveness(j, h);
    j["token"] = s.value->token.empty() ? json(nullptr) : json(s.value->token);
    if (s.value->fence) j["fence"] = *s.value->fence;
    j["acquired_at"] = format_rfc3339(h.since);
    j["held_ms"] = std::max<int64_t>(0, (now_wall() - h.since).count());
  }
  j["waiters"] = s.waiters;
  if (with_counter) {  // inspect: the queue, each waiter with its liveness
    json queue = json::array();
    for (const auto& w : s.queue)
      queue.push_back({{"token", w.token},
                       {"waiting_ms", w.waiting.count()},
                       {"alive", w.place.count() > 0},
                       {"place_ms", w.place.count()},
                       {"shared", w.shares}});
    j["queue"] = queue;
  }
  if (s.kind == LockState::Kind::semaphore) j["semaphore_holders"] = places_json(s.semaphore);
  if (s.kind == LockState::Kind::shared) j["shared_holders"] = places_json(s.shared);
  if (with_counter) {
    j["fence_counter"] = s.fence_counter ? json(*s.fence_counter) : json(nullptr);
    // How long each is kept (--retention); null: for ever, or there is none.
    auto kept = [](Millis pttl) { return pttl.count() >= 0 ? json(pttl.count()) : json(nullptr); };
    j["fence_counter_ttl_ms"] = kept(s.fence_counter_pttl);
    j["history_ttl_ms"] = kept(s.history_pttl);
  }
  j["last_run"] = s.last_run ? run_json(*s.last_run) : json(nullptr);
  return j;
}

// Keys and values are bytes, JSON strings are UTF-8: bytes that are not become U+FFFD (as in
// json_string()), where dump() would throw.
void print_json(const json& j) {
  write_stdout(j.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
}

// The part of a status line after the key and the state word.
std::string lock_details(const LockState& s) {
  switch (s.kind) {
  case LockState::Kind::free:
  case LockState::Kind::not_a_lock: return "";
  case LockState::Kind::foreign:
    return "by another client  " + ttl_text(s.pttl) + "  value \"" + printable(s.raw, 40) + "\"";
  case LockState::Kind::semaphore: {
    std::string out = "by " + std::to_string(s.semaphore.size()) + " (semaphore):";
    for (size_t i = 0; i < s.semaphore.size(); ++i)
      out += (i ? ", " : " ") + place_text(s.semaphore[i]);
    return out;
  }
  case LockState::Kind::shared: {
    size_t n = s.shared.size();
    std::string out = "shared by " + std::to_string(n) + (n == 1 ? " holder:" : " holders:");
    for (size_t i = 0; i < n; ++i) out += (i ? ", " : " ") + place_text(s.shared[i]);
    if (s.waiters > 0) out += "  " + std::to_string(s.waiters) + " waiting";
    return out;
  }
  case LockState::Kind::broken:
    return broken_text(*s.value, s.pttl) +
           (s.waiters > 0 ? "  " + std::to_string(s.waiters) + " waiting" : "");
  case LockState::Kind::held: {
    const Holder& h = s.value->holder;
    std::string out = "by " + holder_text(h);
    out += "  for " + format_duration(std::max(Millis(0), now_wall() - h.since));
    out += "  " + ttl_text(s.pttl);
    out += "  token " + s.value->token.substr(0, 8) + "...";
    if (s.waiters > 0) out += "  " + std::to_string(s.waiters) + " waiting";
    std::string gone = gone_text(h, holder_liveness(h), s.pttl);
    if (!gone.empty()) out += "  " + gone;
    return out;
  }
  }
  return "";
}

std::string state_word(const LockState& s, const OutputStyle& style) {
  switch (s.kind) {
  case LockState::Kind::free: return paint(style, "32", "free");
  case LockState::Kind::held:
  case LockState::Kind::semaphore:
  case LockState::Kind::shared:
  case LockState::Kind::foreign: return paint(style, "33", "held");
  case LockState::Kind::broken: return paint(style, "31", "broken");
  case LockState::Kind::not_a_lock: return paint(style, "31", "not a lock (" + s.type + ")");
  }
  return "";
}

// The state word and the details after it: "held  by web-1 pid 21877 (report.sh)  for 3m12s ...".
// A tombstone holds the lock for nobody; what it tells is why the lock is not free:
// "broken: web-1 pid 21877 (report.sh) was broken by alice@ops-1 3s ago; free once ...".
std::string state_text(const LockState& s, const OutputStyle& style) {
  std::string details = lock_details(s);
  if (details.empty()) return state_word(s, style);
  return state_word(s, style) + (s.kind == LockState::Kind::broken ? ": " : "  ") + details;
}

}  // namespace

OutputStyle output_style(bool json) {
  OutputStyle style;
  style.json = json;
  const char* no_color = std::getenv("NO_COLOR");
  style.color = !json && ::isatty(STDOUT_FILENO) && !(no_color && *no_color);
  return style;
}

void write_stdout(const std::string& text) {
  if (write_all(STDOUT_FILENO, text.data(), text.size())) return;
  if (errno == EPIPE) throw StdoutClosed(k_exit_internal, errno_message("write to stdout"));
  throw Error(k_exit_internal, errno_message("write to stdout"));
}

std::string printable(std::string_view text, size_t max) { return terminal_safe(text, max); }

std::string broken_text(const LockValue& v, Millis pttl) {
  std::string whose = v.token.empty() ? "another client's lock" : holder_text(v.holder);
  return whose + " was broken by " + printable(v.broken->by) + " " +
         format_duration(std::max(Millis(0), now_wall() - v.broken->at)) +
         " ago; free once it has stopped, in " + format_duration(std::max(Millis(0), pttl)) +
         " at the latest";
}

std::string describe_holder(std::string_view raw_value, Millis pttl) {
  auto v = decode_lock_value(raw_value);
  if (!v) return "another client (value \"" + printable(raw_value) + "\"), " + ttl_text(pttl);
  if (v->broken) return "nobody: " + broken_text(*v, pttl);
  std::string out = holder_text(v->holder);
  out += " for " + format_duration(std::max(Millis(0), now_wall() - v->holder.since));
  Liveness liveness = holder_liveness(v->holder);
  std::string gone = gone_text(v->holder, liveness, pttl);
  if (liveness == Liveness::gone) return out + "; " + gone;  // it says when the lock expires
  return out + ", " + ttl_text(pttl) + (gone.empty() ? "" : "; " + gone);
}

std::string describe_holders(std::string_view raw_value, Millis pttl, int64_t sharers) {
  if (sharers <= 0) return describe_holder(raw_value, pttl);
  return std::to_string(sharers) + (sharers == 1 ? " shared holder" : " shared holders") +
         "; the last to end: " + describe_holder(raw_value, pttl);
}

void print_locks(const std::vector<LockState>& locks, const OutputStyle& style) {
  LockPrinter printer(style);
  for (const auto& s : locks) printer.fit(s.key);
  printer.print(locks);
  printer.finish();
}

void LockPrinter::fit(std::string_view key) {
  if (!style_.json) key_width_ = std::max(key_width_, printable(key).size());
}

void LockPrinter::print(const std::vector<LockState>& locks) {
  std::string out;
  if (style_.json) {
    // print_json()'s {"locks": [...]}, each lock indented as the array's element it is.
    for (const auto& s : locks) {
      out += printed_ ? ",\n" : "{\n  \"locks\": [\n";
      printed_ = true;
      std::string one = lock_json(s, false).dump(2, ' ', false, json::error_handler_t::replace);
      for (size_t at = 0, next; at < one.size(); at = next + 1) {
        next = std::min(one.find('\n', at), one.size());
        out.append("    ").append(one, at, next - at);
        if (next < one.size()) out += '\n';
      }
    }
  } else {
    for (const auto& s : locks) {
      std::string key = printable(s.key);
      std::string line = key + std::string(key_width_ - std::min(key_width_, key.size()) + 2, ' ') +
                         state_text(s, style_);
      if (s.last_run) line += "  last run: " + last_run_text(*s.last_run);
      out += line + "\n";
    }
  }
  if (!out.empty()) write_stdout(out);
}

void LockPrinter::finish() {
  if (style_.json) write_stdout(printed_ ? "\n  ]\n}\n" : "{\n  \"locks\": []\n}\n");
}

void print_inspect(const LockState& s, const OutputStyle& style) {
  if (style.json) {
    print_json(lock_json(s, true));
    return;
  }
  std::vector<std::pair<std::string, std::string>> rows;
  rows.emplace_back("key", printable(s.key));
  rows.emplace_back("state", state_word(s, style));
  if (s.kind == LockState::Kind::broken) rows.emplace_back("broken", broken_text(*s.value, s.pttl));
  if (s.value && !s.value->token.empty()) {
    const Holder& h = s.value->holder;
    rows.emplace_back("holder", printable(h.host) + " pid " + std::to_string(h.pid) + ", user " +
                                    printable(h.user));
    rows.emplace_back("holder alive", alive_text(h, holder_liveness(h), s.pttl));
    rows.emplace_back("command", printable(h.cmd));
    rows.emplace_back("acquired at",
                      format_rfc3339(h.since) + " (" +
                          format_duration(std::max(Millis(0), now_wall() - h.since)) + " ago)");
    rows.emplace_back("token", s.value->token);
    if (s.value->fence) rows.emplace_back("fence", std::to_string(*s.value->fence));
  } else if (s.kind == LockState::Kind::foreign) {
    rows.emplace_back("holder", "another client (not rlock)");
  }
  if (s.kind == LockState::Kind::held || s.kind == LockState::Kind::broken ||
      s.kind == LockState::Kind::foreign)
    rows.emplace_back("ttl", s.pttl.count() < 0 ? "none (never expires)" : format_duration(s.pttl));
  if (s.kind == LockState::Kind::shared)
    rows.emplace_back("shared by", std::to_string(s.shared.size()) +
                                       (s.shared.size() == 1 ? " holder" : " holders"));
  for (const auto* places : {&s.semaphore, &s.shared})
    for (const auto& h : *places) {
      std::string gone = place_gone_text(h);
      rows.emplace_back("holder", (!h.value          ? "another client"
                                   : h.value->broken ? "broken: " + broken_text(*h.value, h.ttl)
                                                     : holder_text(h.value->holder)) +
                                      ", ttl " + format_duration(h.ttl) + ", token " + h.token +
                                      (gone.empty() ? "" : "; " + gone));
    }
  rows.emplace_back("waiters", std::to_string(s.waiters));
  for (size_t i = 0; i < s.queue.size(); ++i) {
    const QueuedWaiter& w = s.queue[i];
    rows.emplace_back(
        "  " + std::to_string(i + 1) + ".",
        "token " + w.token.substr(0, 8) + "..." + (w.shares ? " (shared)" : "") + "  waiting " +
            format_duration(w.waiting) + "  " +
            (w.place.count() > 0
                 ? "alive (its place lasts " + format_duration(w.place) + " unless renewed)"
                 : "gone (no renewal for " + format_duration(-w.place) +
                       "; dropped at the next attempt)"));
  }
  rows.emplace_back("fence counter", s.fence_counter
                                         ? std::to_string(*s.fence_counter)
                                         : "none (never acquired, or expired after --retention)");
  // --retention: how long what rlock keeps of this lock outlives its last use.
  auto kept = [](Millis pttl) {
    return pttl.count() == -1 ? std::string("for ever") : format_duration(pttl) + " more";
  };
  if (s.fence_counter_pttl.count() != -2 || s.history_pttl.count() != -2)
    rows.emplace_back(
        "kept", "fence counter " +
                    (s.fence_counter_pttl.count() == -2 ? std::string("none")
                                                        : kept(s.fence_counter_pttl)) +
                    ", history " +
                    (s.history_pttl.count() == -2 ? std::string("none") : kept(s.history_pttl)));
  if (s.kind == LockState::Kind::held || s.kind == LockState::Kind::broken ||
      s.kind == LockState::Kind::foreign)
    rows.emplace_back("value", printable(s.raw, 500));
  if (s.last_run)
    rows.emplace_back("last run", last_run_text(*s.last_run) + ", held " +
                                      format_duration(Millis(s.last_run->held_ms)) + ", fence " +
                                      std::to_string(s.last_run->fence));
  std::string out;
  for (const auto& [label, value] : rows)
    out += label + std::string(15 - label.size(), ' ') + value + "\n";
  write_stdout(out);
}

void print_history(const std::string& key, const std::vector<RunRecord>& runs,
                   const OutputStyle& style) {
  if (style.json) {
    json list = json::array();
    for (const auto& r : runs) list.push_back(run_json(r));
    print_json({{"key", key}, {"runs", list}});
    return;
  }
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"ACQUIRED AT", "HOST", "PID", "HELD", "WAITED", "FENCE", "RESULT"});
  for (const auto& r : runs) {
    // A skipped run (--record-skips) held nothing and drew no fence; a reset is no run at all.
    bool held = r.fence > 0;
    bool waited = r.end != run_end_name(RunEnd::period_reset);
    rows.push_back({format_rfc3339(r.holder.since), printable(r.holder.host),
                    std::to_string(r.holder.pid), held ? format_duration(Millis(r.held_ms)) : "-",
                    waited ? format_duration(Millis(r.waited_ms)) : "-",
                    held ? std::to_string(r.fence) : "-",
                    result_text(r) + (r.period.empty() ? "" : "  " + printable(r.period))});
  }
  std::vector<size_t> width(rows.front().size(), 0);
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i)
      line += i + 1 < row.size() ? row[i] + std::string(width[i] - row[i].size() + 2, ' ') : row[i];
    out += line + "\n";
  }
  write_stdout(out);
}

namespace {

std::string server_time_text(int64_t ms) { return format_rfc3339(WallTime(Millis(ms))); }

// "exit 3 on web-2 at 2026-11-30T02:00:05.120Z", the time by the server's clock.
std::string checked_run_text(const CheckedRun& r) {
  std::string out = result_text(r.record) + " on " + printable(r.record.holder.host) + " at " +
                    server_time_text(r.ended_ms);
  return r.from_period ? out + " (this period's --once-per record)" : out;
}

json checked_run_json(const CheckedRun& r) {
  return {{"host", r.record.holder.host},
          {"pid", r.record.holder.pid},
          {"user", r.record.holder.user},
          {"command", r.record.holder.cmd},
          {"since", format_rfc3339(r.record.holder.since)},
          {"ended", server_time_text(r.ended_ms)},
          {"end", r.record.end},
          {"exit_status", r.record.exit_status},
          {"held_ms", r.record.held_ms},
          {"fence", r.record.fence},
          {"in_window", r.in_window},
          {"source", r.from_period ? "period" : "history"}};
}

// "in the last 25h (since ...)" or "in this period (2026-11-30, Europe/Berlin; since ...)".
std::string window_text(const CheckOptions& o, const CheckResult& r) {
  std::string since = "since " + server_time_text(r.window.start_ms);
  if (r.window.name.empty()) return "in the last " + printable(o.every_text) + " (" + since + ")";
  return "in this period (" + r.window.name + ", " + o.tz.value_or("UTC") + "; " + since + ")";
}

}  // namespace

void print_check(const CheckOptions& o, const CheckResult& r, const OutputStyle& style) {
  if (style.json) {
    json running = json::array();
    for (const Holder& h : r.running) {
      json one = holder_json(h);
      one["since"] = format_rfc3339(h.since);
      running.push_back(one);
    }
    auto run = [](const std::optional<CheckedRun>& c) {
      return c ? checked_run_json(*c) : json(nullptr);
    };
    print_json({{"key", o.key},
                {"every", o.every_text},
                {"tz", r.window.name.empty() ? json(nullptr) : json(o.tz.value_or("UTC"))},
                {"period", r.window.name.empty() ? json(nullptr) : json(r.window.name)},
                {"now", server_time_text(r.now_ms)},
                {"window_start", server_time_text(r.window.start_ms)},
                {"ok", r.ok()},
                {"last_success", run(r.last_success)},
                {"last_run", run(r.last_run)},
                {"runs_in_window", r.runs_in_window},
                {"failures_in_window", r.failures_in_window},
                {"history_entries", r.entries_read},
                {"running", running},
                {"unanswered", r.unanswered}});
    return;
  }
  std::string line = printable(o.key) + ": ";
  if (r.ok()) {
    const CheckedRun& s = *r.last_success;
    line += paint(style, "32", "ok") + ", last success " + server_time_text(s.ended_ms) + " on " +
            printable(s.record.holder.host) + " (exit 0 after " +
            format_duration(Millis(s.record.held_ms)) + ")";
    if (s.from_period) line += " (this period's --once-per record)";
  } else if (r.entries_read == 0 && !r.last_run) {
    line += "no run recorded (history is written by rlock run; --history-length 0 disables it)";
  } else if (r.runs_in_window == 0) {
    line += "no run " + window_text(o, r);
  } else {
    line += "no successful run " + window_text(o, r) + ": " + std::to_string(r.runs_in_window) +
            (r.runs_in_window == 1 ? " run, failed" : " runs, all failed");
  }
  if (!r.ok()) {
    if (r.last_run) line += "; last: " + checked_run_text(*r.last_run);
    if (r.last_success && r.last_success->ended_ms != r.last_run->ended_ms)
      line += "; last success " + server_time_text(r.last_success->ended_ms) + " on " +
              printable(r.last_success->record.holder.host);
    else if (!r.last_success && r.last_run)
      line += "; no success in its history";
  }
  for (size_t i = 0; i < r.running.size(); ++i)
    line += (i ? ", " : "; running now on ") + printable(r.running[i].host) + " pid " +
            std::to_string(r.running[i].pid) + " since " + format_rfc3339(r.running[i].since);
  if (!r.unanswered.empty()) {
    line += "; no answer from";
    for (const std::string& node : r.unanswered) line += " " + node;
  }
  write_stdout(line + "\n");
}

void print_acquired(const std::string& key, const std::string& token, int64_t fence, Millis ttl,
                    const OutputStyle& style) {
  if (style.json) {
    print_json({{"key", key}, {"token", token}, {"fence", fence}, {"ttl_ms", ttl.count()}});
    return;
  }
  write_stdout(token + "\n");
}

void print_config(const RawSettings& settings, const std::optional<std::string>& config_file,
                  const OutputStyle& style) {
  auto origin_name = [](Origin::Kind kind) {
    switch (kind) {
    case Origin::Kind::default_value: return "default";
    case Origin::Kind::file: return "file";
    case Origin::Kind::environment: return "environment";
    case Origin::Kind::flag: return "flag";
    }
    return "";
  };
  if (style.json) {
    json all = json::object();
    for (const SettingInfo& info : all_settings()) {
      auto it = settings.find(info.name);
      if (it == settings.end()) {
        all[info.name] = nullptr;
        continue;
      }
      all[info.name] = {{"value", display_value(info.name, it->second)},
                        {"origin", origin_name(it->second.origin.kind)},
                        {"where", it->second.origin.where}};
    }
    print_json(
        {{"config_file", config_file ? json(*config_file) : json(nullptr)}, {"settings", all}});
    return;
  }
  auto row = [](const std::string& name, const std::string& value, const std::string& where) {
    std::string line = name + std::string(name.size() < 21 ? 21 - name.size() : 1, ' ') + value;
    if (!where.empty()) line += std::string(value.size() < 41 ? 41 - value.size() : 1, ' ') + where;
    return line + "\n";
  };
  std::string out = row("config-file", config_file ? *config_file : "(none)", "");
  for (const SettingInfo& info : all_settings()) {
    auto it = settings.find(info.name);
    if (it == settings.end()) {
      out += row(info.name, "-", "");
      continue;
    }
    const RawValue& v = it->second;
    std::string value = display_value(info.name, v);
    if (value.empty()) value = "\"\"";
    std::string where = v.origin.kind == Origin::Kind::default_value
                            ? v.origin.where  // "default", or the rule a derived default follows
                            : std::string(origin_name(v.origin.kind)) + " " + v.origin.where;
    out += row(info.name, value, where);
  }
  write_stdout(out);
}

}  // namespace rlock

namespace rlock {

namespace {

const char* watch_event_name(WatchEvent::Kind kind) {
  switch (kind) {
  case WatchEvent::Kind::state: return "state";
  case WatchEvent::Kind::taken: return "taken";
  case WatchEvent::Kind::renewed_late: return "renewed_late";
  case WatchEvent::Kind::overdue: return "overdue";
  case WatchEvent::Kind::released: return "released";
  case WatchEvent::Kind::expired: return "expired";
  case WatchEvent::Kind::broken: return "broken";
  case WatchEvent::Kind::queued: return "queued";
  case WatchEvent::Kind::dequeued: return "dequeued";
  case WatchEvent::Kind::place_taken: return "place_taken";
  case WatchEvent::Kind::place_released: return "place_released";
  case WatchEvent::Kind::place_expired: return "place_expired";
  }
  return "";
}

const char* evidence_name(WatchEvent::Evidence evidence) {
  switch (evidence) {
  case WatchEvent::Evidence::none: return nullptr;
  case WatchEvent::Evidence::notification: return "notification";
  case WatchEvent::Evidence::history: return "history";
  case WatchEvent::Evidence::ttl: return "ttl";
  case WatchEvent::Evidence::outage: return "outage";
  }
  return nullptr;
}

// One line of watch: compact JSON, or the text after a timestamp.
void print_watch_line(const json& j, const std::string& text, const OutputStyle& style) {
  if (style.json) {
    write_stdout(j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
    return;
  }
  write_stdout(format_rfc3339(now_wall()) + "  " + text + "\n");
}

// "web-2 pid 4121 (report.sh)", or "another client (value "...")".
std::string who(const std::optional<LockValue>& value, const std::string& raw) {
  if (!value || (value->token.empty() && value->holder.host.empty()))
    return "another client (value \"" + printable(raw, 40) + "\")";
  return holder_text(value->holder);
}

// "free in 28.4s unless renewed"
std::string free_in(Millis ttl) {
  return ttl.count() < 0 ? "it never expires"
                         : "free in " + format_duration(ttl) + " unless renewed";
}

// ", first in line 3f2a9c41..." when a waiter is known.
std::string first_in_line(const LockState& lock) {
  std::string first = first_waiter(lock);
  return first.empty() ? "" : ", first in line " + first.substr(0, 8) + "...";
}

// "; 2 waiting, first in line 3f2a9c41..." for a lock that has waiters.
std::string waiting_text(const LockState& lock) {
  if (lock.waiters <= 0) return "";
  return "; " + std::to_string(lock.waiters) + " waiting" + first_in_line(lock);
}

// How a release or an expiry was told from the other, when no keyspace event said.
std::string evidence_text(WatchEvent::Evidence evidence) {
  switch (evidence) {
  case WatchEvent::Evidence::history: return " (as its run's history entry says)";
  case WatchEvent::Evidence::ttl: return " (judged by the ttl it had left)";
  case WatchEvent::Evidence::outage:
    return " while Redis was unreachable (or lost, if Redis restarted without its data: then "
           "its holder may still be running)";
  case WatchEvent::Evidence::none:
  case WatchEvent::Evidence::notification: break;
  }
  return "";
}

// Whether the run of the holder E is about has ended well (its history entry is there), so
// that its lock was kept for --min-hold.
bool run_over(const WatchEvent& e) { return e.run && e.run->end != run_end_name(RunEnd::lost); }

// ": exit 3", ": hung (79)": how the run of the holder E is about ended, when its history entry
// is there already; the first thing an operator asks of a release.
std::string run_result(const WatchEvent& e) { return e.run ? ": " + result_text(*e.run) : ""; }

// " after 12.3s": how long the holder of a release held the lock, when that is known.
std::string held_for(Millis held) {
  return held.count() < 0 ? "" : " after " + format_duration(held);
}

// "2 places held (semaphore)", "1 shared holder"
std::string places_text(const WatchEvent& e) {
  size_t n = e.shared ? e.lock.shared.size() : e.lock.semaphore.size();
  if (e.shared) return std::to_string(n) + (n == 1 ? " shared holder" : " shared holders");
  return std::to_string(n) + (n == 1 ? " place" : " places") + " held (semaphore)";
}

std::string watch_text(const WatchEvent& e, const OutputStyle& style) {
  using Kind = WatchEvent::Kind;
  const std::string subject = who(e.value, e.raw);
  const bool tombstone = e.value && e.value->broken;
  std::string renews = e.lease.count() > 0
                           ? " (rlock renews with " + format_duration(e.lease * 2 / 3) + " left)"
                           : "";
  std::string fence = e.value && e.value->fence ? ", fence " + std::to_string(*e.value->fence) : "";
  // Taken: when it is free unless renewed; a run no look saw is gone already.
  std::string until = e.evidence == WatchEvent::Evidence::history
                          ? ", between two looks" + evidence_text(e.evidence)
                          : "; " + free_in(e.ttl);
  switch (e.kind) {
  case Kind::state: {
    std::string details = lock_details(e.lock);
    // The details of a held lock say how many wait already.
    std::string waiting = details.find(" waiting") == std::string::npos ? waiting_text(e.lock)
                                                                        : first_in_line(e.lock);
    return state_text(e.lock, style) + waiting;
  }
  case Kind::taken:
    return paint(style, "33", "taken") + " by " + subject + fence + until + waiting_text(e.lock);
  case Kind::renewed_late:
    return paint(style, "31", "renewed late") + " by " + subject + ": " + format_duration(e.left) +
           " of its " + format_duration(e.lease) + " ttl left" + renews;
  case Kind::overdue:
    return paint(style, "31", "overdue") + ": " + subject + " has not renewed, " +
           format_duration(e.ttl) + " of its " + format_duration(e.lease) + " ttl left" + renews +
           "; free then unless renewed" + waiting_text(e.lock);
  case Kind::released:
    if (tombstone)
      return paint(style, "32", "released") + ": the broken holder " + subject + " has stopped" +
             evidence_text(e.evidence) + waiting_text(e.lock);
    return paint(style, "32", "released") + " by " + subject + held_for(e.held) + run_result(e) +
           evidence_text(e.evidence) + waiting_text(e.lock);
  case Kind::expired:
    if (tombstone)
      return paint(style, "31", "expired") + ": the tombstone of " + subject +
             " ended (its lease is over)" + evidence_text(e.evidence) + waiting_text(e.lock);
    if (run_over(e))
      return paint(style, "32", "expired") + ": " + subject +
             " had ended its run, the lock was kept for --min-hold" + evidence_text(e.evidence) +
             waiting_text(e.lock);
    // After an outage it may not have stopped at all.
    return paint(style, "31", "expired") + ": " + subject +
           (e.evidence == WatchEvent::Evidence::outage ? "" : " stopped renewing") +
           (e.held.count() < 0 ? "" : ", it held the lock " + format_duration(e.held)) +
           evidence_text(e.evidence) + waiting_text(e.lock);
  case Kind::broken:
    return paint(style, "31", "broken") + ": " + broken_text(*e.value, e.ttl) +
           waiting_text(e.lock);
  case Kind::queued:
  case Kind::dequeued:
    return std::string(e.kind == Kind::queued ? "queued" : "dequeued") + ": " +
           std::to_string(e.lock.waiters) + " waiting (was " + std::to_string(e.was_waiters) + ")" +
           first_in_line(e.lock);
  case Kind::place_taken:
    return std::string(e.shared ? "shared place taken" : "place taken") + " by " + subject + fence +
           until + "; " + places_text(e) + waiting_text(e.lock);
  case Kind::place_released:
    return std::string(e.shared ? "shared place released" : "place released") + " by " + subject +
           held_for(e.held) + evidence_text(e.evidence) + "; " + places_text(e) +
           waiting_text(e.lock);
  case Kind::place_expired:
    return paint(style, "31", e.shared ? "shared place expired" : "place expired") + ": " +
           subject + " stopped renewing" + evidence_text(e.evidence) + "; " + places_text(e) +
           waiting_text(e.lock);
  }
  return "";
}

}  // namespace

void print_watch_start(const std::vector<std::string>& keys, const WatchMode& mode,
                       const OutputStyle& style) {
  std::string names;
  for (const std::string& k : keys) names += (names.empty() ? "" : ", ") + printable(k);
  std::string text = "watching " + names + " by ";
  if (mode.notifications)
    text += "keyspace notifications (notify-keyspace-events \"" + printable(mode.config) + "\")";
  else
    text += "polling every " + format_duration(mode.interval) + " (" + mode.reason + ")";
  if (!style.json) {
    write_stdout(text + "\n");
    return;
  }
  auto or_null = [](const std::string& s) { return s.empty() ? json(nullptr) : json(s); };
  print_watch_line({{"event", "watching"},
                    {"time", format_rfc3339(now_wall())},
                    {"keys", keys},
                    {"mode", mode.notifications ? "notifications" : "polling"},
                    {"notify_keyspace_events", or_null(mode.config)},
                    {"interval_ms", mode.interval.count()},
                    {"reason", or_null(mode.reason)}},
                   "", style);
}

void print_watch_event(const WatchEvent& e, const OutputStyle& style) {
  if (!style.json) {
    print_watch_line({}, printable(e.lock.key) + "  " + watch_text(e, style), style);
    return;
  }
  using Kind = WatchEvent::Kind;
  const LockValue* v = e.value ? &*e.value : nullptr;
  bool places = e.kind == Kind::place_taken || e.kind == Kind::place_released ||
                e.kind == Kind::place_expired;
  std::string next = first_waiter(e.lock);
  const char* evidence = evidence_name(e.evidence);
  json j = {
      {"event", watch_event_name(e.kind)},
      {"time", format_rfc3339(now_wall())},
      {"key", e.lock.key},
      {"state", state_name(e.lock.kind)},
      {"type", e.lock.kind == LockState::Kind::not_a_lock ? json(e.lock.type) : json(nullptr)},
      {"holder", v ? holder_json(v->holder) : json(nullptr)},
      {"token", v && !v->token.empty() ? json(v->token) : json(nullptr)},
      {"fence", v && v->fence ? json(*v->fence) : json(nullptr)},
      {"acquired_at", v ? json(format_rfc3339(v->holder.since)) : json(nullptr)},
      {"held_ms", e.held.count() >= 0 ? json(e.held.count()) : json(nullptr)},
      {"broken", v ? broken_json(*v) : json(nullptr)},
      {"value", e.raw.empty() ? json(nullptr) : json(e.raw)},
      {"ttl_ms", e.ttl.count() >= 0 ? json(e.ttl.count()) : json(nullptr)},
      {"lease_ms", e.lease.count() > 0 ? json(e.lease.count()) : json(nullptr)},
      {"left_ms", e.kind == Kind::renewed_late ? json(e.left.count()) : json(nullptr)},
      {"evidence", evidence ? json(evidence) : json(nullptr)},
      {"shared", places ? json(e.shared) : json(nullptr)},
      {"waiters", e.lock.waiters},
      {"was_waiters",
       e.kind == Kind::queued || e.kind == Kind::dequeued ? json(e.was_waiters) : json(nullptr)},
      {"next_waiter", next.empty() ? json(nullptr) : json(next)},
  };
  if (e.kind == Kind::state) j["lock"] = lock_json(e.lock, false);
  print_watch_line(j, "", style);
}

void print_watch_unreachable(const std::string& message, const OutputStyle& style) {
  print_watch_line(
      {{"event", "unreachable"}, {"time", format_rfc3339(now_wall())}, {"error", message}},
      paint(style, "31", "Redis unreachable") + " (" + message + "); retrying", style);
}

void print_watch_reachable(Millis down, const OutputStyle& style) {
  print_watch_line(
      {{"event", "reachable"}, {"time", format_rfc3339(now_wall())}, {"down_ms", down.count()}},
      "Redis answers again after " + format_duration(down), style);
}

}  // namespace rlock
