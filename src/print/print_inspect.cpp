// inspect: everything known about one lock, a row per fact under its label (or JSON).
#include "print/print_json.h"
#include "print/print_phase.h"
#include "print/print_text.h"

namespace rlock {

namespace {

using Rows = std::vector<std::pair<std::string, std::string>>;

// Where the values of inspect's rows start.
constexpr size_t k_label_width = 15;

// The "holder alive" row.
std::string alive_text(const HolderView& h, Millis pttl) {
  switch (h.liveness) {
  case Liveness::unknown: return "unknown (not this host)";
  case Liveness::other_pid_namespace:
    return "unknown (another PID namespace on this host, such as a container: its pid "
           "means another process here)";
  case Liveness::running:
    return h.who.group ? "yes, held for its process group until the last of it exits" : "yes";
  case Liveness::group_running:
    return "yes, its process group: pid " + std::to_string(h.who.pid) +
           " is gone, the group still runs; its keeper renews the lock until the group ends";
  case Liveness::gone:
    return (h.who.group ? "no, the process and its process group are gone; "
                        : "no, the process is gone; ") +
           expiry_text(pttl);
  }
  return "";
}

// Who holds the lock, and since when; another client, for a value rlock did not write.
void add_holder(Rows& rows, const LockView& v) {
  if (v.kind == LockState::Kind::broken) rows.emplace_back("broken", broken_text(*v.holder, v.ttl));
  if (v.holder && !v.holder->token.empty()) {
    const HolderView& h = *v.holder;
    rows.emplace_back("holder", printable(h.who.host) + " pid " + std::to_string(h.who.pid) +
                                    ", user " + printable(h.who.user));
    rows.emplace_back("holder alive", alive_text(h, v.ttl));
    rows.emplace_back("command", printable(h.who.cmd));
    // What an engineer logged in on the holder's host looks for: the job's own pid.
    if (h.command_pid)
      rows.emplace_back("command pid", std::to_string(*h.command_pid) + " (in " +
                                           printable(h.who.host) + "'s process table)");
    else if (h.liveness == Liveness::unknown && !h.who.host.empty())
      rows.emplace_back("command pid",
                        "known on " + printable(h.who.host) + " (run rlock inspect there)");
    rows.emplace_back("acquired at",
                      format_rfc3339(h.who.since) + " (" + format_duration(h.held) + " ago)");
    if (h.last_output)
      rows.emplace_back("last output", format_rfc3339(*h.last_output) + " (" +
                                           format_duration(h.last_output_ago) + " ago)");
    rows.emplace_back("token", printable(h.token));
    if (h.fence) rows.emplace_back("fence", std::to_string(*h.fence));
    if (h.phase) rows.emplace_back("phase", phase_text(*h.phase));
  } else if (v.kind == LockState::Kind::foreign) {
    rows.emplace_back("holder", "another client (not rlock)");
  }
  if (v.has_value)
    rows.emplace_back("ttl", v.ttl.count() < 0 ? "none (never expires)" : format_duration(v.ttl));
}

// A row per place of a semaphore or a shared lock.
void add_places(Rows& rows, const LockView& v) {
  if (v.kind == LockState::Kind::shared)
    rows.emplace_back("shared by", std::to_string(v.shared.size()) +
                                       (v.shared.size() == 1 ? " holder" : " holders"));
  for (const auto* places : {&v.semaphore, &v.shared})
    for (const PlaceView& p : *places) {
      std::string who = !p.holder          ? "another client"
                        : p.holder->broken ? "broken: " + broken_text(*p.holder, p.ttl)
                                           : holder_text(p.holder->who);
      std::string gone =
          p.holder && !p.holder->broken ? gone_text(*p.holder, p.ttl, "its place") : "";
      std::string last = p.holder ? last_output_text(*p.holder) : "";
      rows.emplace_back("holder", who + ", ttl " + format_duration(p.ttl) + ", token " +
                                      printable(p.token) + (last.empty() ? "" : ", " + last) +
                                      (gone.empty() ? "" : "; " + gone));
      if (p.holder && p.holder->phase) rows.emplace_back("  phase", phase_text(*p.holder->phase));
    }
}

// Whether waiter W still renews its place in the queue.
std::string waiter_place_text(const QueuedWaiter& w) {
  if (w.place.count() > 0)
    return "alive (its place lasts " + format_duration(w.place) + " unless renewed)";
  return "gone (no renewal for " + format_duration(-w.place) + "; dropped at the next attempt)";
}

// The waiters, a row each in arrival order.
void add_queue(Rows& rows, const LockView& v) {
  rows.emplace_back("waiters", std::to_string(v.waiters));
  for (size_t i = 0; i < v.queue.size(); ++i) {
    const QueuedWaiter& w = v.queue[i];
    rows.emplace_back("  " + std::to_string(i + 1) + ".",
                      "token " + printable(w.token.substr(0, 8)) + "..." +
                          (w.shares ? " (shared)" : "") + "  waiting " +
                          format_duration(w.waiting) + "  " + waiter_place_text(w));
  }
}

// The fence counter, and how long what rlock keeps of this lock outlives its last use
// (--retention).
void add_retention(Rows& rows, const LockView& v) {
  rows.emplace_back("fence counter", v.fence_counter
                                         ? std::to_string(*v.fence_counter)
                                         : "none (never acquired, or expired after --retention)");
  auto kept = [](Millis pttl) {
    if (pttl.count() == -2) return std::string("none");
    return pttl.count() == -1 ? std::string("for ever") : format_duration(pttl) + " more";
  };
  if (v.fence_counter_kept.count() != -2 || v.history_kept.count() != -2)
    rows.emplace_back("kept", "fence counter " + kept(v.fence_counter_kept) + ", history " +
                                  kept(v.history_kept));
}

}  // namespace

void print_inspect(const LockState& s, const OutputStyle& style) {
  LockView v = view_lock(s, now_wall());
  if (style.json) {
    write_stdout(inspect_json(v));
    return;
  }
  Rows rows;
  rows.emplace_back("key", printable_key(v.key));
  rows.emplace_back("state", state_word(v, style));
  if (std::string nodes = nodes_text(v); !nodes.empty()) rows.emplace_back("nodes", nodes);
  add_holder(rows, v);
  add_places(rows, v);
  add_queue(rows, v);
  if (v.not_shown > 0) rows.emplace_back("not shown", not_shown_text(v));
  if (!v.pause_raw.empty()) rows.emplace_back("paused", pause_text(v.pause_raw, v.pause_ttl));
  add_retention(rows, v);
  if (v.has_value) rows.emplace_back("value", printable(v.value, 500));
  if (v.last_run)
    rows.emplace_back("last run", last_run_text(*v.last_run, v.last_run_ago) + ", held " +
                                      format_duration(Millis(v.last_run->held_ms)) + ", fence " +
                                      std::to_string(v.last_run->fence));
  write_stdout(labelled_rows(rows, k_label_width));
}

}  // namespace rlock
