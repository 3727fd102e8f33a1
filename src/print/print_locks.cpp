// status and list: one line per lock (or {"locks": [...]}); the holder as a busy run names it.
#include <algorithm>

#include "print/print_json.h"
#include "print/print_phase.h"
#include "print/print_text.h"

namespace rlock {

namespace {

// What is known of a place's holder's process (gone_text()), or "".
std::string place_gone_text(const PlaceView& p) {
  if (!p.holder || p.holder->broken) return "";
  return gone_text(*p.holder, p.ttl, "its place");
}

// "another client", "broken (...)" or "web-2 pid 4121 (report.sh)", with "[holder process
// gone; its place expires in 28.1s]" after a holder that is gone (or what gone_text() says of
// a pid in another PID namespace): one place of a semaphore or a shared lock, in a status line.
std::string place_text(const PlaceView& p) {
  if (!p.holder) return "another client";
  if (p.holder->broken) return "broken (" + broken_text(*p.holder, p.ttl) + ")";
  std::string gone = place_gone_text(p);
  std::string last = last_output_text(*p.holder);
  std::string phase = p.holder->phase ? " [" + phase_text(*p.holder->phase) + "]" : "";
  return holder_text(p.holder->who) + (last.empty() ? "" : " " + last) + phase +
         (gone.empty() ? "" : " [" + gone + "]");
}

std::string place_list(const std::vector<PlaceView>& places) {
  std::string out;
  for (size_t i = 0; i < places.size(); ++i) out += (i ? ", " : " ") + place_text(places[i]);
  return out;
}

// "  2 waiting", or "" when none waits.
std::string waiters_text(const LockView& v) {
  return v.waiters > 0 ? "  " + std::to_string(v.waiters) + " waiting" : "";
}

std::string held_details(const LockView& v) {
  const HolderView& h = *v.holder;
  std::string out = "by " + holder_text(h.who);
  out += "  for " + format_duration(h.held);
  out += "  " + ttl_text(v.ttl);
  out += "  token " + printable(h.token.substr(0, 8)) + "...";
  if (h.last_output) out += "  " + last_output_text(h);
  out += waiters_text(v);
  if (h.phase) out += "  " + phase_text(*h.phase);
  std::string gone = gone_text(h, v.ttl);
  if (!gone.empty()) out += "  " + gone;
  return out;
}

}  // namespace

std::string not_shown_text(const LockView& v) {
  if (v.not_shown == 0) return "";
  return std::to_string(v.not_shown) + " more waiters or places not shown (rlock reads at most " +
         std::to_string(k_places_read_most) + " of each)";
}

std::string lock_details(const LockView& v) {
  switch (v.kind) {
  case LockState::Kind::free:
  case LockState::Kind::not_a_lock: return "";
  case LockState::Kind::foreign:
    return "by another client  " + ttl_text(v.ttl) + "  value \"" + printable(v.value, 40) + "\"";
  case LockState::Kind::semaphore:
    return "by " + std::to_string(v.semaphore.size()) + " (semaphore):" + place_list(v.semaphore);
  case LockState::Kind::shared: {
    size_t n = v.shared.size();
    return "shared by " + std::to_string(n) + (n == 1 ? " holder:" : " holders:") +
           place_list(v.shared) + waiters_text(v);
  }
  case LockState::Kind::broken: return broken_text(*v.holder, v.ttl) + waiters_text(v);
  case LockState::Kind::held: return held_details(v);
  }
  return "";
}

std::string state_word(const LockView& v, const OutputStyle& style) {
  if (!v.votes.known) return paint(style, "33", "unknown");
  switch (v.kind) {
  case LockState::Kind::free: return paint(style, "32", "free");
  case LockState::Kind::held:
  case LockState::Kind::semaphore:
  case LockState::Kind::shared:
  case LockState::Kind::foreign: return paint(style, "33", "held");
  case LockState::Kind::broken: return paint(style, "31", "broken");
  case LockState::Kind::not_a_lock: return paint(style, "31", "not a lock (" + v.type + ")");
  }
  return "";
}

std::string nodes_text(const LockView& v) {
  const NodeVotes& n = v.votes;
  if (n.nodes < 2 || (n.agree == n.nodes && !v.minority)) return "";
  std::string out = "on " + std::to_string(n.agree) + " of " + std::to_string(n.nodes) + " nodes";
  if (const auto& m = v.minority)
    out += "; held on " + std::to_string(m->nodes) + " by " + describe_holder(m->raw, m->pttl) +
           (n.known ? ", not a quorum" : ", a quorum with the nodes that did not answer?");
  for (size_t i = 0; i < n.unanswered.size(); ++i)
    out += (i ? ", " : "; no answer from ") + n.unanswered[i];
  return out;
}

std::string state_text(const LockView& v, const OutputStyle& style) {
  std::string details = lock_details(v);
  std::string out = state_word(v, style);
  if (!details.empty()) out += (v.kind == LockState::Kind::broken ? ": " : "  ") + details;
  if (v.not_shown > 0) out += "  " + not_shown_text(v);
  if (!v.pause_raw.empty()) out += "  " + paint(style, "33", pause_text(v.pause_raw, v.pause_ttl));
  if (std::string nodes = nodes_text(v); !nodes.empty()) out += "  [" + nodes + "]";
  return out;
}

std::string broken_text(const LockValue& v, Millis pttl) {
  return broken_text(view_holder(v, now_wall()), pttl);
}

std::string describe_holder(std::string_view raw_value, Millis pttl) {
  auto v = decode_lock_value(raw_value);
  if (!v) return "another client (value \"" + printable(raw_value) + "\"), " + ttl_text(pttl);
  HolderView h = view_holder(*v, now_wall());
  if (h.broken) return broken_holder_text(h, pttl);
  std::string out = holder_text(h.who) + " for " + format_duration(h.held);
  std::string gone = gone_text(h, pttl);
  if (h.liveness == Liveness::gone) return out + "; " + gone;  // it says when the lock expires
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
  if (!style_.json) key_width_ = std::max(key_width_, printable_key(key).size());
}

void LockPrinter::print(const std::vector<LockState>& locks) {
  std::string out;
  WallTime now = now_wall();
  for (const auto& s : locks) {
    LockView v = view_lock(s, now);
    if (style_.json) {
      // {"locks": [...]} as one document, each lock an element of the array.
      out += printed_ ? ",\n" : "{\n  \"locks\": [\n";
      printed_ = true;
      out += listed_lock_json(v);
      continue;
    }
    std::string key = printable_key(v.key);
    out += key + std::string(key_width_ - std::min(key_width_, key.size()) + 2, ' ') +
           state_text(v, style_);
    if (v.last_run) out += "  last run: " + last_run_text(*v.last_run, v.last_run_ago);
    out += "\n";
  }
  if (!out.empty()) write_stdout(out);
}

void LockPrinter::finish() {
  if (style_.json) write_stdout(printed_ ? "\n  ]\n}\n" : "{\n  \"locks\": []\n}\n");
}

}  // namespace rlock
