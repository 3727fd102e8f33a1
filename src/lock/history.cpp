#include "lock/history.h"

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <map>
#include <set>

#include "lock/held_lock.h"
#include "lock/lock.h"
#include "lock/scripts.h"
#include "redis/redlock.h"
#include "redis/retry.h"
#include "util/exit_status.h"

namespace rlock {

namespace {

// How long a period's slot outlives the period: hosts whose cron fires late still see it.
Millis slot_margin(const Period& p) {
  Millis length = p.unit == Period::Unit::fixed ? p.length : Millis(3600 * 1000);
  return std::min(length, Millis(3600 * 1000));
}

// The period that is current by the server's clock, so that hosts whose clocks disagree agree
// on it.
Result<PeriodSlot> current_slot(Redis& redis, const Period& period,
                                const std::optional<std::string>& tz, TimePoint deadline) {
  auto time = redis.call({"TIME"}, deadline);
  if (!time) return time.failure();
  auto now_ms = server_time_ms(*time);
  if (!now_ms) return unexpected_reply("TIME");
  return period_slot(period, tz, *now_ms);
}

}  // namespace

namespace {

// How each end is told at the edges. A null result or label: success or failure by the exit
// status. An exit status of -1: the command's own, -2: --conflict-exit-code's.
struct RunEndWords {
  RunEnd end;
  const char* name;
  const char* result;
  const char* label;
  int exit_status;
  EntryKind kind = EntryKind::run;
};
constexpr int k_command_status = -1, k_conflict_status = -2;
constexpr RunEndWords k_run_ends[] = {
    {RunEnd::exited, "exited", nullptr, nullptr, k_command_status},
    {RunEnd::signalled, "signalled", "failure", "signalled", k_command_status},
    {RunEnd::lost, "lost", "lost", "lost", k_exit_lost},
    {RunEnd::broken, "broken", "lost", "lost", k_exit_lost},
    {RunEnd::max_run, "max-run", "max-run", "max-run", k_exit_max_run},
    {RunEnd::hung, "hung", "hung", "hung", k_exit_hung},
    {RunEnd::stopped, "stopped", "stopped", "stopped", k_exit_stopped},
    {RunEnd::busy, "busy", "busy", "busy", k_conflict_status, EntryKind::skip},
    {RunEnd::paused, "paused", "busy", "busy", k_conflict_status, EntryKind::skip},
    {RunEnd::done_this_period, "done-this-period", "done", "done", k_conflict_status,
     EntryKind::skip},
    {RunEnd::pause, "pause", "error", "error", k_exit_ok, EntryKind::action},
    {RunEnd::resume, "resume", "error", "error", k_exit_ok, EntryKind::action},
    {RunEnd::period_reset, "period-reset", "error", "error", k_exit_ok, EntryKind::action},
    {RunEnd::forced_release, "forced-release", "error", "error", k_exit_ok, EntryKind::action},
    {RunEnd::running, "running", "error", "error", k_exit_internal},
    {RunEnd::unknown, "unknown", "unknown", "unknown", k_exit_internal},
};

const RunEndWords& words(RunEnd end) {
  for (const RunEndWords& w : k_run_ends)
    if (w.end == end) return w;
  return k_run_ends[0];  // every enumerator has its row (history_test.cpp)
}

}  // namespace

const char* run_end_name(RunEnd end) { return words(end).name; }

EntryKind entry_kind(std::string_view end) {
  for (const RunEndWords& w : k_run_ends)
    if (end == w.name) return w.kind;
  return EntryKind::run;
}

const char* run_result_name(RunEnd end, int status) {
  const char* result = words(end).result;
  return result ? result : status == 0 ? "success" : "failure";
}

const char* run_end_label(RunEnd end, int status) {
  const char* label = words(end).label;
  return label ? label : status == 0 ? "success" : "failure";
}

int run_end_exit_status(RunEnd end, int status, int conflict) {
  int fixed = words(end).exit_status;
  return fixed == k_command_status ? status : fixed == k_conflict_status ? conflict : fixed;
}

bool RunRecord::ended() const {
  return end != run_end_name(RunEnd::running) && end != run_end_name(RunEnd::unknown);
}

Argv start_fields(const Holder& h, const std::string& period) {
  Argv out{"host", h.host, "pid", std::to_string(h.pid), "user", h.user, "cmd", h.cmd};
  if (!period.empty()) out.insert(out.end(), {"period", period});
  return out;
}

RunRecord action_entry(RunEnd action, const std::string& reason) {
  RunRecord r;
  r.holder = current_holder("rlock");
  r.holder.since = WallTime{};  // recorded at the server's clock (history_add.lua)
  r.by = operator_name();
  r.reason = reason;
  r.token = make_token();
  r.end = run_end_name(action);
  return r;
}

void record_action(Redis& redis, const std::string& key, const RunRecord& entry, int history_length,
                   Millis retention) {
  if (history_length > 0)
    send_history(redis, key, history_entry(key, entry, history_length, retention));
}

RunRecord skipped_run(const Holder& holder, const std::string& token, RunEnd end, int status) {
  RunRecord r;
  r.holder = holder;
  r.holder.since = WallTime{};  // recorded at the server's clock (history_add.lua)
  r.token = token;
  r.end = run_end_name(end);
  r.exit_status = status;
  return r;
}

void settle_starts(std::vector<RunRecord>& runs, const std::vector<int64_t>& held) {
  for (RunRecord& r : runs)
    if (r.end == run_end_name(RunEnd::running) &&
        std::find(held.begin(), held.end(), r.fence) == held.end())
      r.end = run_end_name(RunEnd::unknown);
}

std::vector<Argv> history_holders_reads(const std::string& key) {
  // HSCAN, not HVALS: a hash of another program's under these names cannot make the read
  // large; rlock's hold a value per host that runs the job (docs/DESIGN.md, "Reads with a
  // bound").
  const std::string most = std::to_string(k_holders_read_most);
  return {{"GETRANGE", key, "0", "1023"},
          {"HSCAN", helper_key(key, "holders"), "0", "COUNT", most},
          {"HSCAN", helper_key(key, "shared-values"), "0", "COUNT", most}};
}

std::vector<int64_t> fences_in_values(const std::vector<Reply>& values) {
  std::vector<int64_t> out;
  auto add = [&](const Reply& r) {
    if (!r.is_string()) return;
    if (auto v = decode_lock_value(r.str); v && v->fence) out.push_back(*v->fence);
  };
  // A value, or an HSCAN reply: a cursor and the fields and values; a token is no value.
  for (const Reply& r : values) {
    add(r);
    if (r.is_array() && r.elements.size() == 2 && r.elements[1].is_array())
      for (const Reply& e : r.elements[1].elements) add(e);
  }
  return out;
}

std::string period_run_text(const SlotClaim& c) {
  if (c.state == "in-progress") return "it is still running";
  if (c.state == "running") return "it never reported its end (lost)";
  if (c.status == "0") return "it succeeded";
  if (c.end == run_end_name(RunEnd::exited)) return "it exited with status " + c.status;
  return "it ended: " + c.end + " (" + c.status + ")";
}

std::string period_done_text(const SlotClaim& c, const std::string& slot, bool retry_failed) {
  std::string hint = c.state == "in-progress" ? ""
                     : retry_failed || c.status == "0"
                         ? "; rlock reset-period would let it run again"
                         : "; rlock reset-period would let it run again (--retry-failed: "
                           "after every failure)";
  return "already run this period (" + slot + ") on " + c.host + " at " + c.since + ": " +
         period_run_text(c) + hint;
}

Result<SlotClaim> PeriodGuard::claim(const Holder& holder, int64_t fence, const StartRecord& start,
                                     TimePoint deadline) {
  fence_ = fence;
  // Sent again until answered: a second delivery finds its own fence (period_claim.lua).
  auto reply = resend_until(deadline, [&]() -> Result<Reply> {
    auto slot = current_slot(redis_, period_, tz_, deadline);
    if (!slot) return slot.failure();
    slot_ = *slot;
    int64_t expire_at = slot_.end_ms + slot_margin(period_).count();
    Argv args{holder.host,           std::to_string(holder.pid), holder.user,
              std::to_string(fence), retry_failed_ ? "1" : "0",  std::to_string(expire_at)};
    if (start.max_length > 0) {
      args.insert(args.end(),
                  {std::to_string(start.max_length), std::to_string(start.retention.count())});
      args.insert(args.end(), start.fields.begin(), start.fields.end());
      Argv waited{"waited_ms",
                  std::to_string(
                      std::chrono::duration_cast<Millis>(Clock::now() - start.wait_began).count()),
                  "period", slot_.name};
      args.insert(args.end(), waited.begin(), waited.end());
    }
    return eval(redis_, scripts::period_claim,
                {helper_key(key_, "once:" + slot_.name), key_, helper_key(key_, "sem"),
                 helper_key(key_, "holders"), helper_key(key_, "history")},
                args, deadline);
  });
  if (!reply) return reply.failure();
  const auto& e = reply->elements;
  if (!reply->is_array() || e.empty() || !e[0].is_integer())
    return unexpected_reply("the claim script");
  if (e[0].integer == 1 && e.size() == 2) return SlotClaim{true, e[1].str, "", "", "", "", ""};
  if (e.size() != 6) return unexpected_reply("the claim script");
  return SlotClaim{false, "", e[1].str, e[2].str, e[3].str, e[4].str, e[5].str};
}

Result<std::optional<SlotClaim>> PeriodGuard::finished_run(TimePoint deadline) {
  // One round trip as a rule: the slot this host's clock names is read with the server's
  // clock, and read again only when the server's clock names another. TIME after the key's
  // command goes to the key's node in a Cluster.
  auto host_ms =
      std::chrono::duration_cast<Millis>(std::chrono::system_clock::now().time_since_epoch());
  std::string guess = period_slot(period_, tz_, host_ms.count()).name;
  auto replies =
      redis_.pipeline({{"HGETALL", helper_key(key_, "once:" + guess)}, {"TIME"}}, deadline);
  if (!replies) return replies.failure();
  if (replies->back().type == Reply::Type::error) return redis_.server_failure(replies->back().str);
  auto now_ms = server_time_ms(replies->back());
  if (!now_ms) return unexpected_reply("TIME");
  slot_ = period_slot(period_, tz_, *now_ms);
  Result<Reply> reply = std::move(replies->front());
  if (slot_.name != guess)
    reply = redis_.call({"HGETALL", helper_key(key_, "once:" + slot_.name)}, deadline);
  if (!reply) return reply.failure();
  if (reply->type == Reply::Type::error) return redis_.server_failure(reply->str);
  std::map<std::string, std::string> f;
  for (size_t i = 0; i + 1 < reply->elements.size(); i += 2)
    f[reply->elements[i].str] = reply->elements[i + 1].str;
  // As period_claim.lua judges it; a slot still "running" is a run in progress, or one whose
  // host died, which the claim tells apart.
  if (f.empty() || f["state"] == "running") return std::optional<SlotClaim>{};
  if (retry_failed_ && f["status"] != "0") return std::optional<SlotClaim>{};
  return std::optional<SlotClaim>{
      SlotClaim{false, "", f["host"], f["since"], f["state"], f["status"], f["end"]}};
}

Result<Unit> PeriodGuard::record_end(Redis& on, const RunRecord& record, TimePoint deadline) {
  ScriptCall end{&scripts::period_finish,
                 {helper_key(key_, "once:" + slot_.name)},
                 {std::to_string(fence_), std::to_string(record.exit_status), record.end}};
  // Sent again until answered, with its source (ScriptCall): a second delivery finds our end
  // recorded (period_finish.lua).
  auto reply = resend_until(deadline, [&] {
    auto sent = eval(on, end, deadline);
    end.with_source = true;
    return sent;
  });
  if (!reply) return reply.failure();
  return Unit{};
}

Result<PeriodReset> reset_period(Redis& redis, const std::string& key, const Period& period,
                                 const std::optional<std::string>& tz, TimePoint deadline) {
  auto slot = current_slot(redis, period, tz, deadline);
  if (!slot) return slot.failure();
  auto reply = eval(redis, scripts::period_reset,
                    {helper_key(key, "once:" + slot->name), key, helper_key(key, "sem"),
                     helper_key(key, "holders")},
                    {}, deadline);
  if (!reply) return reply.failure();
  const auto& e = reply->elements;
  if (!reply->is_array() || e.empty() || !e[0].is_integer())
    return unexpected_reply("the reset script");
  PeriodReset out{PeriodReset::Outcome::no_run, slot->name, {}};
  if (e[0].integer == 0) return out;
  if (e[0].integer == 2 && e.size() == 3) {
    out.outcome = PeriodReset::Outcome::still_running;
    out.run = SlotClaim{false, "", e[1].str, e[2].str, "running", "", ""};
    return out;
  }
  if (e[0].integer != 1 || e.size() != 6) return unexpected_reply("the reset script");
  out.outcome = PeriodReset::Outcome::forgotten;
  out.run = SlotClaim{false, "", e[1].str, e[2].str, e[3].str, e[4].str, e[5].str};
  return out;
}

ScriptCall history_entry(const std::string& key, const RunRecord& r, int max_length,
                         Millis retention) {
  // A run that took no lock (a skip, a reset) is timed by the server when recorded (since "").
  Argv args{r.token,
            std::to_string(max_length),
            std::to_string(retention.count()),
            r.start,
            "host",
            r.holder.host,
            "pid",
            std::to_string(r.holder.pid),
            "user",
            r.holder.user,
            "cmd",
            r.holder.cmd,
            "since",
            r.holder.since == WallTime{} ? "" : format_rfc3339(r.holder.since),
            "fence",
            std::to_string(r.fence),
            "waited_ms",
            std::to_string(r.waited_ms),
            "held_ms",
            std::to_string(r.held_ms),
            "status",
            std::to_string(r.exit_status),
            "end",
            r.end};
  for (const auto& [name, value] :
       {std::pair{"period", &r.period}, {"by", &r.by}, {"reason", &r.reason}, {"until", &r.until}})
    if (!value->empty()) args.insert(args.end(), {name, *value});
  if (r.cpu_user_ms >= 0)  // the command ran: its cost is known, all three together
    args.insert(args.end(),
                {"cpu_user_ms", std::to_string(r.cpu_user_ms), "cpu_sys_ms",
                 std::to_string(r.cpu_sys_ms), "max_rss_kb", std::to_string(r.max_rss_kb)});
  if (r.attempt > 0) args.insert(args.end(), {"attempt", std::to_string(r.attempt)});
  if (r.attempt_held_ms >= 0)
    args.insert(args.end(), {"attempt_since", format_rfc3339(r.attempt_since), "attempt_held_ms",
                             std::to_string(r.attempt_held_ms)});
  // Each attempt of a run (--retry) is an entry of its own, sent again until answered: its
  // token and number find the first delivery.
  args[0] = entry_token(r.token, r.attempt);
  return {&scripts::history_add,
          {helper_key(key, "history"), helper_key(key, "ended"), helper_key(key, "last-success")},
          std::move(args)};
}

ScriptCall attempt_start(const std::string& key, const Holder& holder, int64_t fence, int attempt,
                         int max_length, Millis retention) {
  Argv args{std::to_string(fence), std::to_string(max_length), std::to_string(retention.count())};
  for (std::string& field : start_fields(holder)) args.push_back(std::move(field));
  args.insert(args.end(), {"attempt", std::to_string(attempt)});
  return {&scripts::history_start, {helper_key(key, "history")}, std::move(args)};
}

std::string entry_token(const std::string& token, int attempt) {
  return attempt > 1 ? token + "/" + std::to_string(attempt) : token;
}

ScriptCall history_forget(const std::string& key, const std::string& token,
                          const std::string& start) {
  return {&scripts::history_add,
          {helper_key(key, "history"), helper_key(key, "ended")},
          {token, "0", "0", start}};
}

std::optional<RunRecord> decode_history_entry(const Reply& entry) {
  if (!entry.is_array() || entry.elements.size() != 2 || !entry.elements[1].is_array())
    return std::nullopt;
  RunRecord r;
  r.id = entry.elements[0].str;
  const auto& f = entry.elements[1].elements;
  auto number = [](const std::string& s) { return std::strtoll(s.c_str(), nullptr, 10); };
  for (size_t i = 0; i + 1 < f.size(); i += 2) {
    const std::string& name = f[i].str;
    const std::string& value = f[i + 1].str;
    if (name == "host")
      r.holder.host = value;
    else if (name == "pid")
      r.holder.pid = number(value);
    else if (name == "user")
      r.holder.user = value;
    else if (name == "cmd")
      r.holder.cmd = value;
    else if (name == "since")
      r.holder.since = parse_rfc3339(value).value_or(WallTime{});
    else if (name == "fence")
      r.fence = number(value);
    else if (name == "waited_ms")
      r.waited_ms = number(value);
    else if (name == "held_ms")
      r.held_ms = number(value);
    else if (name == "status")
      r.exit_status = static_cast<int>(number(value));
    else if (name == "end")
      r.end = value;
    else if (name == "period")
      r.period = value;
    else if (name == "by")
      r.by = value;
    else if (name == "reason")
      r.reason = value;
    else if (name == "until")
      r.until = value;
    else if (name == "cpu_user_ms")
      r.cpu_user_ms = number(value);
    else if (name == "cpu_sys_ms")
      r.cpu_sys_ms = number(value);
    else if (name == "max_rss_kb")
      r.max_rss_kb = number(value);
    else if (name == "attempt")
      r.attempt = static_cast<int>(number(value));
    else if (name == "attempt_since")
      r.attempt_since = parse_rfc3339(value).value_or(WallTime{});
    else if (name == "attempt_held_ms")
      r.attempt_held_ms = number(value);
  }
  return r;
}

namespace {

// Redlock: what makes one history entry, the same on every node: an entry sent again after a
// lost reply may have gone to a second node (each node knows only its own). One run's attempt
// (--retry) is one host, pid, start, fence and attempt.
std::string one_entry(const RunRecord& r) {
  return r.holder.host + " " + std::to_string(r.holder.pid) + " " +
         std::to_string(r.holder.since.time_since_epoch().count()) + " " + std::to_string(r.fence) +
         " " + std::to_string(r.attempt);
}

}  // namespace

Result<HistoryRead> read_history(Redis& redis, const std::string& key, int count,
                                 TimePoint deadline) {
  // Each node's history with its holders now, which tell a start that is running from one
  // whose run died (settle_starts).
  std::vector<Argv> reads{
      {"XREVRANGE", helper_key(key, "history"), "+", "-", "COUNT", std::to_string(count)}};
  for (Argv& read : history_holders_reads(key)) reads.push_back(std::move(read));
  auto replies = redis.broadcast(reads, deadline, {}, quorum_then_the_rest(redis.node_count()));
  HistoryRead out;
  std::optional<Failure> failure;
  for (size_t i = 0; i < replies.size(); ++i) {
    Result<Reply> reply = replies[i] ? Result<Reply>((*replies[i])[0]) : replies[i].failure();
    if (reply && reply->type == Reply::Type::error)
      reply = redis.node(i).server_failure(reply->str, reads[0]);
    if (reply && !reply->is_array()) reply = unexpected_reply("XREVRANGE");
    if (!reply) {
      failure = reply.failure();
      out.unanswered.push_back(redis.node(i).name());
      continue;
    }
    std::vector<RunRecord> runs;
    for (const Reply& e : reply->elements)
      if (auto r = decode_history_entry(e)) runs.push_back(std::move(*r));
    settle_starts(runs, fences_in_values({replies[i]->begin() + 1, replies[i]->end()}));
    for (RunRecord& r : runs) out.runs.push_back(std::move(r));
  }
  if (out.unanswered.size() == replies.size()) return *failure;
  // Newest first across the nodes, each entry by its own node's clock.
  std::stable_sort(out.runs.begin(), out.runs.end(), [](const RunRecord& a, const RunRecord& b) {
    return history_entry_ms(a.id) > history_entry_ms(b.id);
  });
  if (replies.size() > 1) {
    std::set<std::string> seen;
    std::erase_if(out.runs, [&](const RunRecord& r) { return !seen.insert(one_entry(r)).second; });
  }
  if (out.runs.size() > static_cast<size_t>(count)) out.runs.resize(count);
  return out;
}

std::string history_id_before(const std::string& id) {
  size_t dash = id.find('-');
  if (dash == std::string::npos) return "";
  int64_t ms = std::strtoll(id.c_str(), nullptr, 10);
  unsigned long long seq = std::strtoull(id.c_str() + dash + 1, nullptr, 10);
  if (seq > 0) return std::to_string(ms) + "-" + std::to_string(seq - 1);
  if (ms == 0) return "";
  return std::to_string(ms - 1) + "-18446744073709551615";
}

namespace {

// One node's history as page_history() reads it: the page in hand, newest first, and where
// the next begins ("" when the history ends there).
struct HistoryCursor {
  Redis* node = nullptr;
  std::deque<RunRecord> page;
  std::string next = "+";
  std::vector<int64_t> held;  // the fences of its holders now (settle_starts)
};

Argv history_page_read(const std::string& key, const std::string& from) {
  return {"XREVRANGE", helper_key(key, "history"),         from, "-",
          "COUNT",     std::to_string(k_history_page_runs)};
}

// Puts the entries of REPLY (to ASKED, a history_page_read()) in C's page.
Result<Unit> take_page(HistoryCursor& c, const Argv& asked, Result<Reply> reply) {
  if (reply && reply->type == Reply::Type::error) reply = c.node->server_failure(reply->str, asked);
  if (reply && !reply->is_array()) reply = unexpected_reply("XREVRANGE");
  if (!reply) return reply.failure();
  std::vector<RunRecord> runs;
  for (const Reply& e : reply->elements)
    if (auto r = decode_history_entry(e)) runs.push_back(std::move(*r));
  settle_starts(runs, c.held);
  bool full = reply->elements.size() == static_cast<size_t>(k_history_page_runs);
  c.next = full && !reply->elements.back().elements.empty()
               ? history_id_before(reply->elements.back().elements[0].str)
               : "";
  for (RunRecord& r : runs) c.page.push_back(std::move(r));
  return Unit{};
}

}  // namespace

Result<std::vector<std::string>>
page_history(Redis& redis, const std::string& key, int count, TimePoint first_deadline,
             const std::function<void(const std::vector<RunRecord>&)>& each) {
  std::vector<Argv> reads{history_page_read(key, "+")};
  for (Argv& read : history_holders_reads(key)) reads.push_back(std::move(read));
  auto first = redis.broadcast(reads, first_deadline, {}, quorum_then_the_rest(redis.node_count()));
  std::vector<HistoryCursor> nodes;
  std::vector<std::string> unanswered;
  std::optional<Failure> failure;
  for (size_t i = 0; i < first.size(); ++i) {
    HistoryCursor c;
    c.node = &redis.node(i);
    Result<Unit> taken = first[i] ? Result<Unit>(Unit{}) : Result<Unit>(first[i].failure());
    if (taken) {
      c.held = fences_in_values({first[i]->begin() + 1, first[i]->end()});
      taken = take_page(c, reads[0], Result<Reply>((*first[i])[0]));
    }
    if (!taken) {
      failure = taken.failure();
      unanswered.push_back(c.node->name());
      continue;
    }
    nodes.push_back(std::move(c));
  }
  if (nodes.empty()) return *failure;
  std::set<std::string> seen;
  std::vector<RunRecord> out;
  for (int shown = 0; shown < count;) {
    HistoryCursor* newest = nullptr;
    for (HistoryCursor& c : nodes) {
      if (c.page.empty() && !c.next.empty()) {
        Argv asked = history_page_read(key, c.next);
        // Each page has the command timeout of its own: a long range takes longer than one.
        auto more =
            take_page(c, asked, c.node->call(asked, Clock::now() + c.node->command_timeout()));
        if (!more && nodes.size() == 1) return more.failure();
        if (!more) {
          unanswered.push_back(c.node->name());
          c.next.clear();
        }
      }
      if (!c.page.empty() && (!newest || history_entry_ms(c.page.front().id) >
                                             history_entry_ms(newest->page.front().id)))
        newest = &c;
    }
    if (!newest) break;
    RunRecord r = std::move(newest->page.front());
    newest->page.pop_front();
    if (nodes.size() > 1 && !seen.insert(one_entry(r)).second) continue;
    out.push_back(std::move(r));
    ++shown;
    if (out.size() == static_cast<size_t>(k_history_page_runs)) {
      each(out);
      out.clear();
    }
  }
  if (!out.empty()) each(out);
  return unanswered;
}

int64_t history_entry_ms(const std::string& id) { return std::strtoll(id.c_str(), nullptr, 10); }

}  // namespace rlock
