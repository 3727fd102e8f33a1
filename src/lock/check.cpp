#include "lock/check.h"

#include <algorithm>
#include <cstdlib>
#include <unordered_set>

#include "lock/lock.h"
#include "lock/lock_state.h"
#include "redis/redlock.h"

namespace rlock {

namespace {

// History entries asked for per round trip. The stream keeps 100 by default (--history-length),
// so one page is the whole history of most keys.
constexpr int k_history_page = 100;
// A window with more runs than this is counted only this far back: a check must stay cheap
// however long a history someone configured.
constexpr int k_history_most = 10000;
// The failures since the last success that a check keeps to show, the newest: the text names
// three, the JSON these; the rest are counted.
constexpr size_t k_failures_shown = 10;

// What every node's history is read with: the window's period and zone, the fences that hold
// the lock now, and the deadline of the pages after the first.
struct CheckRead {
  const Period& every;
  const std::optional<std::string>& tz;
  std::vector<int64_t> held;
  TimePoint deadline;
};

Argv history_page(const std::string& key, const std::string& newest) {
  return {"XREVRANGE", helper_key(key, "history"),    newest, "-",
          "COUNT",     std::to_string(k_history_page)};
}

// The fields of a history entry (history_entry() in history.h) that the kept last success
// (KEYS[3] of history_add.lua) holds besides its ID: named, so that a hash of another
// program's cannot make the read large.
constexpr const char* k_entry_fields[] = {
    "host",           "pid",         "user",       "cmd",        "since",   "fence",
    "waited_ms",      "held_ms",     "status",     "end",        "period",  "by",
    "reason",         "cpu_user_ms", "cpu_sys_ms", "max_rss_kb", "attempt", "attempt_since",
    "attempt_held_ms"};

Argv last_success_read(const std::string& key) {
  Argv out{"HMGET", helper_key(key, "last-success"), "id"};
  for (const char* field : k_entry_fields) out.push_back(field);
  return out;
}

// The kept last success (REPLY: to last_success_read()) as a stream entry, for
// decode_history_entry(); nothing when none is kept (a history written by an older rlock).
std::optional<RunRecord> kept_success(const Reply& reply) {
  const auto& e = reply.elements;
  if (!reply.is_array() || e.size() != std::size(k_entry_fields) + 1 || !e[0].is_string())
    return std::nullopt;
  Reply entry, fields, name;
  entry.type = fields.type = Reply::Type::array;
  name.type = Reply::Type::string;
  entry.elements.push_back(e[0]);
  for (size_t i = 0; i < std::size(k_entry_fields); ++i) {
    if (!e[i + 1].is_string()) continue;
    name.str = k_entry_fields[i];
    fields.elements.push_back(name);
    fields.elements.push_back(e[i + 1]);
  }
  entry.elements.push_back(std::move(fields));
  auto run = decode_history_entry(entry);
  if (!run || !is_success(*run)) return std::nullopt;
  return run;
}

// What one node's history says: its clock, and its runs as a check counts them.
struct NodeHistory {
  int64_t now_ms = 0;
  CheckWindow window;
  int entries = 0;
  bool read_all = true;  // false: k_history_most entries were read, and more are in the window
  std::optional<RunTally> runs;
};

// Adds the entries of PAGE (an XREVRANGE reply) to INTO; HELD: the fences that hold the lock
// now, whose start entries are runs still going (settle_starts). The ID of the oldest entry,
// or "" when the page was not full (the history ends there).
Result<std::string> add_page(const Reply& page, const std::vector<int64_t>& held,
                             NodeHistory& into) {
  if (!page.is_array()) return unexpected_reply("XREVRANGE");
  std::string oldest;
  for (const Reply& entry : page.elements) {
    auto record = decode_history_entry(entry);
    if (!record) return unexpected_reply("XREVRANGE");
    ++into.entries;
    oldest = record->id;
    std::vector<RunRecord> one{std::move(*record)};
    settle_starts(one, held);
    into.runs->add(std::move(one[0]));
  }
  if (page.elements.size() < static_cast<size_t>(k_history_page)) return std::string();
  return oldest;
}

// NODE's history from its first page (FIRST: the replies to history_page(), TIME and
// last_success_read()) on, read further while its runs are still in the window, and at most
// k_history_most entries: the kept last success stands for the rest.
Result<NodeHistory> node_history(Redis& node, const std::string& key, const CheckRead& read,
                                 const std::vector<Reply>& first) {
  if (first.size() != 3) return unexpected_reply("XREVRANGE, TIME and HMGET");
  const Argv asked[] = {history_page(key, "+"), {"TIME"}, last_success_read(key)};
  // A kept success of another type is none: the next success's end replaces it.
  for (size_t i = 0; i < first.size(); ++i)
    if (first[i].type == Reply::Type::error && (i != 2 || first[i].str.starts_with("NOPERM")))
      return node.server_failure(first[i].str, asked[i]);
  auto now = server_time_ms(first[1]);
  if (!now) return unexpected_reply("TIME");
  NodeHistory h;
  h.now_ms = *now;
  h.window = check_window(read.every, read.tz, *now);
  h.runs.emplace(h.window.start_ms);
  auto oldest = add_page(first[0], read.held, h);
  while (oldest && !oldest->empty() && history_entry_ms(*oldest) >= h.window.start_ms) {
    std::string newest = history_id_before(*oldest);
    if (newest.empty()) break;
    if (h.entries >= k_history_most) {
      h.read_all = false;
      break;
    }
    auto page = node.call(history_page(key, newest), read.deadline);
    if (!page) return page.failure();
    oldest = add_page(*page, read.held, h);
  }
  if (!oldest) return oldest.failure();
  if (auto kept = kept_success(first[2])) h.runs->add_kept_success(std::move(*kept));
  return h;
}

// The success that this period's --once-per slot records, if the job runs --once-per with the
// check's period (and zone): the only record of a job run with --history-length 0.
Result<std::optional<CheckedRun>> period_success(Redis& redis, const std::string& key,
                                                 const Period& every,
                                                 const std::optional<std::string>& tz,
                                                 int64_t now_ms, TimePoint deadline) {
  PeriodSlot slot = period_slot(every, tz, now_ms);
  auto replies = redis.pipeline({{"HGETALL", helper_key(key, "once:" + slot.name)}}, deadline);
  if (!replies) return replies.failure();
  const Reply& all = replies->front();
  if (!all.is_array()) return std::optional<CheckedRun>();  // someone else's data: no evidence
  auto field = [&](const char* name) {
    for (size_t i = 0; i + 1 < all.elements.size(); i += 2)
      if (all.elements[i].str == name) return all.elements[i + 1].str;
    return std::string();
  };
  if (field("state") != "done" || field("status") != "0" ||
      field("end") != run_end_name(RunEnd::exited))
    return std::optional<CheckedRun>();
  CheckedRun run;
  run.record.holder.host = field("host");
  run.record.holder.pid = std::strtoll(field("pid").c_str(), nullptr, 10);
  run.record.holder.user = field("user");
  run.record.holder.since = parse_rfc3339(field("since")).value_or(WallTime{});
  run.record.fence = std::strtoll(field("fence").c_str(), nullptr, 10);
  run.record.end = run_end_name(RunEnd::exited);
  // The slot's end time is the job's host's clock, not the server's: but the slot is this
  // period's, so its run ended within the window whatever that clock says.
  auto ended = parse_rfc3339(field("ended"));
  run.ended_ms = ended ? ended->time_since_epoch().count() : now_ms;
  run.record.held_ms = ended ? std::max<int64_t>(0, (*ended - run.record.holder.since).count()) : 0;
  run.in_window = true;
  run.from_period = true;
  return std::optional<CheckedRun>(std::move(run));
}

// Who holds the lock now (any kind of lock rlock takes), from its state.
std::vector<Holder> holders_now(const LockState& s) {
  std::vector<Holder> out;
  if (s.kind == LockState::Kind::held && s.value) out.push_back(s.value->holder);
  for (const auto* places : {&s.semaphore, &s.shared})
    for (const SemaphoreHolder& place : *places)
      if (place.value && !place.value->broken) out.push_back(place.value->holder);
  return out;
}

}  // namespace

CheckWindow check_window(const Period& every, const std::optional<std::string>& tz,
                         int64_t now_ms) {
  if (every.unit == Period::Unit::fixed) return {now_ms - every.length.count(), ""};
  PeriodSlot slot = period_slot(every, tz, now_ms);
  return {slot.start_ms, slot.name};
}

bool is_run(const RunRecord& r) { return entry_kind(r.end) == EntryKind::run; }

bool is_success(const RunRecord& r) {
  return r.end == run_end_name(RunEnd::exited) && r.exit_status == 0;
}

bool end_unknown(const RunRecord& r) { return r.end == run_end_name(RunEnd::unknown); }

int failures_before(const std::vector<RunRecord>& runs, int64_t fence) {
  auto ours =
      std::find_if(runs.begin(), runs.end(), [&](const RunRecord& r) { return r.fence == fence; });
  RunsOnce once;
  once.first(fence);  // ours is not before itself
  int failures = 0;
  for (auto r = ours == runs.end() ? runs.begin() : ours; r != runs.end(); ++r) {
    if (!once.ended(*r) || end_unknown(*r)) continue;
    if (is_success(*r)) break;
    ++failures;
  }
  return failures;
}

namespace {

// The sequence number of a stream entry's ID, which orders entries of the same ms.
int64_t entry_seq(const std::string& id) {
  size_t dash = id.find('-');
  return dash == std::string::npos ? 0 : std::strtoll(id.c_str() + dash + 1, nullptr, 10);
}

}  // namespace

void RunTally::add(RunRecord entry) {
  // A start entry: the run that holds the lock, or one that ended without saying how, its end
  // unknown (settle_starts). A run's older attempts are judged by its newest entry.
  if (!is_run(entry) || !runs_.first(entry.fence)) return;
  if (entry.end == run_end_name(RunEnd::running)) {
    going_.push_back(entry.fence);
    return;
  }
  CheckedRun run;
  run.ended_ms = history_entry_ms(entry.id);
  run.in_window = run.ended_ms >= window_start_ms_;
  run.record = std::move(entry);
  bool success = is_success(run.record);
  Verdict verdict = success                   ? Verdict::success
                    : end_unknown(run.record) ? Verdict::unknown
                                              : Verdict::failure;
  marks_.push_back(
      {run.ended_ms, entry_seq(run.record.id), run.record.fence, verdict, run.in_window});
  if (!newest_) newest_ = run;
  if (success && !newest_success_)
    newest_success_ = std::move(run);
  else if (!success && !newest_success_ && newest_failures_.size() < k_failures_shown)
    newest_failures_.push_back(std::move(run));
}

void RunTally::add_kept_success(RunRecord run) {
  // A success is the last attempt of its run: entries told of its run had it.
  if (newest_success_ && newest_success_->record.id == run.id) return;
  if (!runs_.first(run.fence)) return;
  CheckedRun kept;
  kept.ended_ms = history_entry_ms(run.id);
  kept.in_window = kept.ended_ms >= window_start_ms_;
  kept.record = std::move(run);
  marks_.push_back({kept.ended_ms, entry_seq(kept.record.id), kept.record.fence, Verdict::success,
                    kept.in_window});
  if (!newest_) newest_ = kept;
  if (!newest_success_ || newest_success_->ended_ms < kept.ended_ms)
    newest_success_ = std::move(kept);
}

void count_runs(std::vector<RunTally>& tallies, CheckResult& out) {
  // Newest first by the clock of the node that recorded it, then its place in the stream.
  auto order = [](const CheckedRun& r) { return std::pair(r.ended_ms, entry_seq(r.record.id)); };
  auto newer = [&](const CheckedRun& a, const CheckedRun& b) { return order(a) > order(b); };
  // Under Redlock a run's attempts may be on two nodes, each of which marked its own newest:
  // the run is counted once, as its newest of all says, and not at all while it runs.
  std::unordered_set<int64_t> going;
  for (const RunTally& t : tallies) going.insert(t.going_.begin(), t.going_.end());
  auto judge = [&] {
    RunsOnce once;
    for (int64_t fence : going) once.first(fence);
    return once;
  };
  std::vector<CheckedRun> failures;
  for (RunTally& t : tallies) {
    if (t.newest_ && !going.contains(t.newest_->record.fence) &&
        (!out.last_run || newer(*t.newest_, *out.last_run)))
      out.last_run = t.newest_;
    if (t.newest_success_ && (!out.last_success || newer(*t.newest_success_, *out.last_success)))
      out.last_success = t.newest_success_;
    for (CheckedRun& f : t.newest_failures_) failures.push_back(std::move(f));
  }
  std::vector<RunTally::Mark> marks;
  for (const RunTally& t : tallies) marks.insert(marks.end(), t.marks_.begin(), t.marks_.end());
  std::stable_sort(marks.begin(), marks.end(), [](const auto& a, const auto& b) {
    return std::pair(a.ended_ms, a.seq) > std::pair(b.ended_ms, b.seq);
  });
  RunsOnce counted = judge();
  using Verdict = RunTally::Verdict;
  for (const RunTally::Mark& run : marks) {
    if (!counted.first(run.fence)) continue;
    bool failed = run.verdict == Verdict::failure, unknown = run.verdict == Verdict::unknown;
    if (run.in_window) {
      ++out.runs_in_window;
      out.failures_in_window += failed;
      out.unknown_in_window += unknown;
    }
    // The failures since the last success (newest first): an ok check names them.
    if (!out.last_success || std::pair(run.ended_ms, run.seq) > order(*out.last_success)) {
      out.failures_since_count += failed;
      out.unknown_since_count += unknown;
    }
  }
  std::erase_if(failures, [&](const CheckedRun& f) {
    return out.last_success && !newer(f, *out.last_success);
  });
  std::stable_sort(failures.begin(), failures.end(), newer);
  RunsOnce shown = judge();
  std::erase_if(failures, [&](const CheckedRun& f) { return !shown.first(f.record.fence); });
  if (failures.size() > k_failures_shown) failures.resize(k_failures_shown);
  out.failures_since = std::move(failures);
}

Result<CheckResult> check_runs(Redis& redis, const std::string& key, const Period& every,
                               const std::optional<std::string>& tz, TimePoint deadline) {
  // The lock first: a start entry of a run that holds it now is no failure, and a run that
  // ends after this read has its end entry in the history read next.
  auto locks = read_locks(redis, {key});
  if (!locks) return locks.failure();
  CheckResult out;
  out.running = holders_now(locks->front());
  out.pause = locks->front().pause;
  out.pause_pttl = locks->front().pause_pttl;
  CheckRead read{every, tz, held_fences(locks->front()), deadline};
  // The history, with TIME after it: in a Cluster a command without a key runs where the
  // one before it ran, so the clock is that of the server whose IDs we compare it with. Under
  // Redlock each run's entry went to one node (the first that answered its writer), so every
  // node is read, each against its own clock.
  // The kept last success comes in the same round trip.
  auto first = redis.broadcast({history_page(key, "+"), {"TIME"}, last_success_read(key)}, deadline,
                               {}, quorum_then_the_rest(redis.node_count()));
  std::optional<Failure> failure;
  std::vector<NodeHistory> nodes;
  for (size_t i = 0; i < first.size(); ++i) {
    Redis& node = redis.node(i);
    auto h = first[i] ? node_history(node, key, read, *first[i])
                      : Result<NodeHistory>(first[i].failure());
    if (!h) {
      failure = h.failure();
      out.unanswered.push_back(node.name());
      continue;
    }
    if (nodes.empty()) {
      out.now_ms = h->now_ms;
      out.window = h->window;
    }
    out.entries_read += h->entries;
    out.read_all = out.read_all && h->read_all;
    nodes.push_back(std::move(*h));
  }
  if (nodes.empty()) return *failure;
  if (redis.node_count() == 1) out.unanswered.clear();
  std::vector<RunTally> tallies;
  for (NodeHistory& node : nodes) tallies.push_back(std::move(*node.runs));
  count_runs(tallies, out);

  if (!out.succeeded() && redis.node_count() == 1) {  // Redlock keeps no period records
    auto slot = period_success(redis, key, every, tz, out.now_ms, deadline);
    if (!slot) return slot.failure();
    if (*slot) {
      out.last_success = **slot;
      if (!out.last_run || out.last_run->ended_ms < (*slot)->ended_ms) out.last_run = **slot;
    }
  }
  return out;
}

}  // namespace rlock
