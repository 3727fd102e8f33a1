#include "print/print_json.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "print/print_text.h"
#include "util/text.h"

namespace rlock {

namespace {

using nlohmann::json;

// For an array: the base64 of each string in it that is not valid UTF-8, null for any other
// item; null when there is no such string.
json raw_bytes_of_items(const json& array) {
  json out = json::array();
  bool any = false;
  for (const json& item : array) {
    bool raw = item.is_string() && !is_valid_utf8(item.get_ref<const std::string&>());
    any = any || raw;
    out.push_back(raw ? json(base64(item.get_ref<const std::string&>())) : json(nullptr));
  }
  return any ? out : json(nullptr);
}

// Keys and values are bytes, JSON strings are UTF-8. So beside each string member NAME of J
// that is not valid UTF-8 goes NAME_base64, its bytes; beside an array that holds such a
// string, NAME_base64 with the base64 of each (null for the other items). A script gets the
// exact bytes back from these (the man pages, JSON OUTPUT).
void add_raw_bytes(json& j) {
  if (j.is_array())
    for (json& item : j) add_raw_bytes(item);
  if (!j.is_object()) return;
  std::vector<std::pair<std::string, json>> added;
  for (auto& [name, value] : j.items()) {
    json raw = nullptr;
    if (value.is_string() && !is_valid_utf8(value.get_ref<const std::string&>()))
      raw = base64(value.get_ref<const std::string&>());
    if (value.is_array()) raw = raw_bytes_of_items(value);
    if (!raw.is_null()) added.emplace_back(name + "_base64", std::move(raw));
    add_raw_bytes(value);
  }
  for (auto& [name, value] : added) j[name] = std::move(value);
}

// J as text, INDENT as dump() takes it: the invalid UTF-8 of its strings as U+FFFD (as in
// json_string()), where dump() would throw, with add_raw_bytes()'s fields to recover it; C1
// controls and bidirectional characters as \uXXXX (json_escape_hidden()).
std::string dumped(json j, int indent) {
  add_raw_bytes(j);
  return json_escape_hidden(j.dump(indent, ' ', false, json::error_handler_t::replace));
}

std::string document(const json& j) { return dumped(j, 2) + "\n"; }

// One line of watch.
std::string line(const json& j) { return dumped(j, -1) + "\n"; }

json or_null(const std::optional<int64_t>& n) { return n ? json(*n) : json(nullptr); }
json or_null(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }
// A count that -1 marks as not known.
json known_or_null(int64_t n) { return n >= 0 ? json(n) : json(nullptr); }
// A ttl, or how long a key is kept: null when it never expires (or there is none).
json ms_or_null(Millis ms) { return ms.count() >= 0 ? json(ms.count()) : json(nullptr); }

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

// A tombstone's "broken": {"by", "at", "reason"}; null for a lock that was not broken.
json broken_json(const std::optional<Breaking>& broken) {
  if (!broken) return nullptr;
  return {
      {"by", broken->by}, {"at", format_rfc3339(broken->at)}, {"reason", or_null(broken->reason)}};
}

// A holder's run's phase (run_phase.h): what it does, since when and until when, by the
// server's clock; the stop's or the retry's details.
json phase_json(const PhaseView& p) {
  const RunPhase& r = p.phase;
  json j = {{"state", run_phase_name(r.kind)},
            {"since", format_rfc3339(WallTime(Millis(p.since_ms)))},
            {"ago_ms", p.ago.count()},
            {"due", format_rfc3339(WallTime(Millis(p.due_ms)))},
            {"due_in_ms", p.due_in.count()}};
  if (r.kind == RunPhase::Kind::stopping) {
    j["why"] = r.why;
    j["signal"] = r.signal;
    j["by"] = or_null(r.by);
    j["reason"] = or_null(r.reason);
  } else if (r.kind == RunPhase::Kind::retrying) {
    j["attempt"] = r.attempt;
    j["attempts"] = r.attempts;
    j["last_exit_status"] = r.last_status ? json(*r.last_status) : json(nullptr);
  }
  return j;
}

// The fields of J that say who holds it (H: the value is rlock's), null for another client's;
// "phase" only while its run stops or waits to retry.
void set_holder(json& j, const std::optional<HolderView>& h) {
  if (h && h->phase) j["phase"] = phase_json(*h->phase);
  j["holder"] = h ? holder_json(h->who) : json(nullptr);
  j["holder_alive"] = h ? alive_json(h->liveness) : json(nullptr);
  j["holder_liveness"] = h ? liveness_json(h->liveness) : json(nullptr);
  j["command_pid"] = h && h->command_pid ? json(*h->command_pid) : json(nullptr);
  j["fence"] = h ? or_null(h->fence) : json(nullptr);
  j["acquired_at"] = h ? json(format_rfc3339(h->who.since)) : json(nullptr);
  j["broken"] = h ? broken_json(h->broken) : json(nullptr);
  j["last_output_at"] = h && h->last_output ? json(format_rfc3339(*h->last_output)) : json(nullptr);
}

json run_json(const RunRecord& r) {
  // An operator's action holds, waits and exits nothing.
  bool action = entry_kind(r.end) == EntryKind::action;
  bool ended = r.ended() && !action;
  return {{"id", r.id},
          {"holder", holder_json(r.holder)},
          {"acquired_at", format_rfc3339(r.holder.since)},
          {"fence", r.fence},
          {"waited_ms", action ? json(nullptr) : json(r.waited_ms)},
          {"held_ms", ended ? json(r.held_ms) : json(nullptr)},
          {"exit_status", ended ? json(r.exit_status) : json(nullptr)},
          {"end", r.end},
          {"period", or_null(r.period)},
          {"by", or_null(r.by)},
          {"reason", or_null(r.reason)},
          {"until", or_null(r.until)},
          {"attempt", r.attempt > 0 ? json(r.attempt) : json(nullptr)},
          {"attempt_started_at",
           r.attempt_span_known() ? json(format_rfc3339(r.attempt_since)) : json(nullptr)},
          {"attempt_held_ms", r.attempt_span_known() ? json(r.attempt_held_ms) : json(nullptr)},
          {"cpu_user_ms", known_or_null(r.cpu_user_ms)},
          {"cpu_sys_ms", known_or_null(r.cpu_sys_ms)},
          {"max_rss_kb", known_or_null(r.max_rss_kb)}};
}

// The places of a semaphore or a shared lock, one object each.
json places_json(const std::vector<PlaceView>& places) {
  json holders = json::array();
  for (const PlaceView& p : places) {
    json one = {{"token", p.token}, {"ttl_ms", p.ttl.count()}, {"value", p.value}};
    set_holder(one, p.holder);
    holders.push_back(one);
  }
  return holders;
}

json queue_json(const std::vector<QueuedWaiter>& queue) {
  json out = json::array();
  for (const QueuedWaiter& w : queue)
    out.push_back({{"token", w.token},
                   {"waiting_ms", w.waiting.count()},
                   {"alive", w.place.count() > 0},
                   {"place_ms", w.place.count()},
                   {"shared", w.shares}});
  return out;
}

// rlock pause: who, when, until when, why; null when not paused.
json pause_json(const std::string& raw, Millis ttl) {
  if (raw.empty()) return nullptr;
  auto pause = decode_pause(raw);
  if (!pause) return {{"text", raw}, {"ttl_ms", ms_or_null(ttl)}};
  return {{"by", pause->by},
          {"paused_at", pause->at},
          {"until", pause->until},
          {"reason", or_null(pause->reason)},
          {"ttl_ms", ms_or_null(ttl)}};
}

// Redlock: how many nodes say what the lock's state shows, and a value fewer than a quorum
// hold.
json nodes_json(const LockView& v) {
  const NodeVotes& n = v.votes;
  json minority = nullptr;
  if (const auto& m = v.minority)
    minority = {{"nodes", m->nodes}, {"value", m->raw}, {"ttl_ms", ms_or_null(m->pttl)}};
  return {{"total", n.nodes},
          {"answered", n.answered},
          {"agree", n.agree},
          {"unanswered", n.unanswered},
          {"held_without_quorum", minority}};
}

// One lock as a JSON object; field names are documented in each command's page (rlock-status(1) JSON OUTPUT). INSPECT adds
// the queue, the fence counter and how long what rlock keeps of the lock is kept.
json lock_json(const LockView& v, bool inspect) {
  json j;
  j["key"] = v.key;
  j["state"] = v.votes.known ? state_name(v.kind) : "unknown";
  if (v.kind == LockState::Kind::not_a_lock) j["type"] = v.type;
  j["value"] = v.has_value ? json(v.value) : json(nullptr);
  j["ttl_ms"] = v.has_value ? ms_or_null(v.ttl) : json(nullptr);
  set_holder(j, v.holder);
  j["token"] = v.holder ? or_null(v.holder->token) : json(nullptr);
  j["held_ms"] = v.holder ? json(v.holder->held.count()) : json(nullptr);
  j["waiters"] = v.waiters;
  j["not_shown"] = v.not_shown;
  if (v.kind == LockState::Kind::semaphore) j["semaphore_holders"] = places_json(v.semaphore);
  if (v.kind == LockState::Kind::shared) j["shared_holders"] = places_json(v.shared);
  if (inspect) {
    j["queue"] = queue_json(v.queue);
    j["fence_counter"] = or_null(v.fence_counter);
    j["fence_counter_ttl_ms"] = ms_or_null(v.fence_counter_kept);
    j["history_ttl_ms"] = ms_or_null(v.history_kept);
  }
  j["last_run"] = v.last_run ? run_json(*v.last_run) : json(nullptr);
  j["pause"] = pause_json(v.pause_raw, v.pause_ttl);
  if (v.votes.nodes > 1) j["nodes"] = nodes_json(v);
  return j;
}

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
  case WatchEvent::Kind::paused: return "paused";
  case WatchEvent::Kind::resumed: return "resumed";
  case WatchEvent::Kind::action: return "action";
  }
  return "";
}

json evidence_json(WatchEvent::Evidence evidence) {
  switch (evidence) {
  case WatchEvent::Evidence::none: return nullptr;
  case WatchEvent::Evidence::notification: return "notification";
  case WatchEvent::Evidence::history: return "history";
  case WatchEvent::Evidence::ttl: return "ttl";
  case WatchEvent::Evidence::outage: return "outage";
  }
  return nullptr;
}

json checked_run_json(const std::optional<CheckedRun>& c) {
  if (!c) return nullptr;
  const CheckedRun& r = *c;
  return {{"host", r.record.holder.host},
          {"pid", r.record.holder.pid},
          {"user", r.record.holder.user},
          {"command", r.record.holder.cmd},
          {"since", format_rfc3339(r.record.holder.since)},
          {"ended", server_time_text(r.ended_ms)},
          {"end", r.record.end},
          {"exit_status", r.record.ended() ? json(r.record.exit_status) : json(nullptr)},
          {"held_ms", r.record.held_ms},
          {"attempt", r.record.attempt > 0 ? json(r.record.attempt) : json(nullptr)},
          {"fence", r.record.fence},
          {"in_window", r.in_window},
          {"source", r.from_period ? "period" : "history"}};
}

// J as an element of a top-level object's array: dumped() with every line indented four
// spaces, without a newline at its end (status and list's "locks", history's "runs").
std::string indented(const json& j) {
  std::string one = dumped(j, 2);
  std::string out;
  for (size_t at = 0, next; at < one.size(); at = next + 1) {
    next = std::min(one.find('\n', at), one.size());
    out.append("    ").append(one, at, next - at);
    if (next < one.size()) out += '\n';
  }
  return out;
}

}  // namespace

std::string listed_lock_json(const LockView& v) { return indented(lock_json(v, false)); }

std::string history_head_json(const std::string& key) {
  // {"key": ..., "key_base64": ...} as history_json() writes it, then the "runs" it opens:
  // "runs" sorts after both, as nlohmann::json orders an object's members.
  std::string head = dumped({{"key", key}}, 2);
  return head.substr(0, head.rfind('\n')) + ",\n  \"runs\": [\n";
}

std::string history_run_json(const RunRecord& run) { return indented(run_json(run)); }

std::string history_tail_json() { return "\n  ]\n}\n"; }

std::string inspect_json(const LockView& v) { return document(lock_json(v, true)); }

std::string history_json(const std::string& key, const std::vector<RunRecord>& runs) {
  json list = json::array();
  for (const auto& r : runs) list.push_back(run_json(r));
  return document({{"key", key}, {"runs", list}});
}

std::string check_json(const CheckOptions& o, const CheckResult& r) {
  json running = json::array();
  for (const Holder& h : r.running) {
    json one = holder_json(h);
    one["since"] = format_rfc3339(h.since);
    running.push_back(one);
  }
  bool period = !r.window.name.empty();
  json failures = json::array();
  for (const CheckedRun& f : r.failures_since) failures.push_back(checked_run_json(f));
  return document({{"key", o.key},
                   {"every", o.every_text},
                   {"tz", period ? json(o.tz.value_or("UTC")) : json(nullptr)},
                   {"period", or_null(r.window.name)},
                   {"now", server_time_text(r.now_ms)},
                   {"window_start", server_time_text(r.window.start_ms)},
                   {"ok", r.ok()},
                   {"slow", r.slow()},
                   {"slower_than_ms", r.slower_than ? json(r.slower_than->count()) : json(nullptr)},
                   {"last_success", checked_run_json(r.last_success)},
                   {"last_run", checked_run_json(r.last_run)},
                   {"failures_since", failures},
                   {"failures_since_count", r.failures_since_count},
                   {"unknown_since_count", r.unknown_since_count},
                   {"pause", pause_json(r.pause, r.pause_pttl)},
                   {"runs_in_window", r.runs_in_window},
                   {"failures_in_window", r.failures_in_window},
                   {"unknown_in_window", r.unknown_in_window},
                   {"history_entries", r.entries_read},
                   {"history_read_all", r.read_all},
                   {"running", running},
                   {"unanswered", r.unanswered}});
}

std::string acquired_json(const std::string& key, const std::string& token, int64_t fence,
                          Millis ttl) {
  return document({{"key", key}, {"token", token}, {"fence", fence}, {"ttl_ms", ttl.count()}});
}

std::string config_json(const RawSettings& settings,
                        const std::optional<std::string>& config_file) {
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
  return document(
      {{"config_file", config_file ? json(*config_file) : json(nullptr)}, {"settings", all}});
}

std::string watch_start_json(const std::vector<std::string>& keys, const WatchMode& mode,
                             WallTime now) {
  return line({{"event", "watching"},
               {"time", format_rfc3339(now)},
               {"keys", keys},
               {"mode", mode.notifications ? "notifications" : "polling"},
               {"notify_keyspace_events", or_null(mode.config)},
               {"interval_ms", mode.interval.count()},
               {"reason", or_null(mode.reason)}});
}

std::string watch_event_json(const WatchEvent& e, WallTime now) {
  using Kind = WatchEvent::Kind;
  std::optional<HolderView> subject;
  if (e.value) subject = view_holder(*e.value, now);
  bool places = e.kind == Kind::place_taken || e.kind == Kind::place_released ||
                e.kind == Kind::place_expired;
  bool queue = e.kind == Kind::queued || e.kind == Kind::dequeued;
  json j = {
      {"event", watch_event_name(e.kind)},
      {"time", format_rfc3339(now)},
      {"key", e.lock.key},
      {"state", state_name(e.lock.kind)},
      {"type", e.lock.kind == LockState::Kind::not_a_lock ? json(e.lock.type) : json(nullptr)},
      {"token", subject ? or_null(subject->token) : json(nullptr)},
      {"held_ms", ms_or_null(e.held)},
      {"value", or_null(e.raw)},
      {"ttl_ms", ms_or_null(e.ttl)},
      {"lease_ms", e.lease.count() > 0 ? json(e.lease.count()) : json(nullptr)},
      {"left_ms", e.kind == Kind::renewed_late ? json(e.left.count()) : json(nullptr)},
      {"evidence", evidence_json(e.evidence)},
      {"shared", places ? json(e.shared) : json(nullptr)},
      {"waiters", e.lock.waiters},
      {"was_waiters", queue ? json(e.was_waiters) : json(nullptr)},
      {"next_waiter", or_null(first_waiter(e.lock))},
  };
  j["holder"] = subject ? holder_json(subject->who) : json(nullptr);
  j["fence"] = subject ? or_null(subject->fence) : json(nullptr);
  j["acquired_at"] = subject ? json(format_rfc3339(subject->who.since)) : json(nullptr);
  j["broken"] = subject ? broken_json(subject->broken) : json(nullptr);
  // How the holder's run ended (released, expired), when its history entry says: what the text
  // form tells after "released by ...".
  j["run"] = e.run ? run_json(*e.run) : json(nullptr);
  j["pause"] = pause_json(e.lock.pause, e.lock.pause_pttl);
  if (e.kind == Kind::state) j["lock"] = lock_json(view_lock(e.lock, now), false);
  return line(j);
}

std::string watch_unreachable_json(const std::string& message, WallTime now) {
  return line({{"event", "unreachable"}, {"time", format_rfc3339(now)}, {"error", message}});
}

std::string watch_reachable_json(Millis down, WallTime now) {
  return line({{"event", "reachable"}, {"time", format_rfc3339(now)}, {"down_ms", down.count()}});
}

std::string findings_json(const std::string& topology, const std::vector<Finding>& findings) {
  json all = json::array();
  for (const Finding& f : findings)
    all.push_back({{"level", level_name(f.level)},
                   {"topic", f.topic},
                   {"server", or_null(f.server)},
                   {"text", f.text}});
  return document({{"topology", topology}, {"findings", all}});
}

}  // namespace rlock
