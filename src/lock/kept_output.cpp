#include "lock/kept_output.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <mutex>

#include "lock/lock.h"
#include "lock/output_window.h"
#include "lock/scripts.h"
#include "util/log.h"

namespace rlock {

namespace {

// The most one stream entry holds: a 16th of SIZE, so that trimming whole entries keeps at least
// 15/16 of SIZE; not over 64 KiB. Less the room a stream node's own bytes take, so that a node
// of one entry fits the allocator's size class of the entry (a 64 KiB entry took 80 KiB).
constexpr size_t k_piece_most = 64 * 1024;
constexpr size_t k_piece_least = 768;
constexpr size_t k_node_room = 256;
// A send that has taken this long means a slow Redis: what is dropped meanwhile is said.
constexpr Millis k_slow_send{1000};
// At most one send this often: what a command prints in between goes in one command.
constexpr Millis k_send_every{100};
// After a failure, how soon to send again, doubling up to the most.
constexpr Millis k_retry_first{250};
constexpr Millis k_retry_most{5000};
// The most entries one command carries.
constexpr size_t k_send_entries = 1024;
// A round of sends carries an eighth of SIZE a command, and at least this: the copies a command
// makes of what it carries (its pieces, the script's arguments, the bytes for the socket) then
// cost less than half of SIZE beside the SIZE bytes waiting. A round sent as one command, with
// each of those copies as large as SIZE, peaked at 9.5 times SIZE (docs/PERFORMANCE.md "Kept
// output").
constexpr size_t k_send_least = 256 * 1024;
// At the run's end, how soon to send again after a failure.
constexpr Millis k_end_retry{50};
// Once sending failed (Redis away), what the end of the run gives the last send.
constexpr Millis k_failing_finish{300};
// How long send_end() waits past its deadline for the thread's last call to give up.
constexpr Millis k_finish_margin{100};

std::string stream_key(const std::string& key, int64_t fence) {
  return kept_output_key(key, "output-") + std::to_string(fence);
}

std::string marks_key(const std::string& key, int64_t fence) {
  return stream_key(key, fence) + "-attempts";
}

// "1234-1" -> 1234.
uint64_t id_offset(const std::string& id) { return std::strtoull(id.c_str(), nullptr, 10); }

// The first ID after ID ("" before the first): IDs are "OFFSET-SEQ".
std::string next_id(const std::string& id) {
  if (id.empty()) return "-";
  size_t dash = id.find('-');
  return id.substr(0, dash) + "-" +
         std::to_string(std::strtoull(id.c_str() + dash + 1, nullptr, 10) + 1);
}

// An XRANGE reply (or a stream's entries in an XREAD reply) as pieces and the end.
Result<OutputRead> decode_entries(const Reply& entries, const std::string& after) {
  OutputRead out;
  out.last_id = after;
  if (entries.is_nil()) return out;
  if (!entries.is_array()) return unexpected_reply("the kept output");
  for (const Reply& e : entries.elements) {
    if (!e.is_array() || e.elements.size() != 2 || !e.elements[1].is_array())
      return unexpected_reply("the kept output");
    out.last_id = e.elements[0].str;
    const auto& f = e.elements[1].elements;
    uint64_t offset = id_offset(out.last_id);
    if (f.size() == 2 && (f[0].str == "o" || f[0].str == "e")) {
      out.pieces.push_back({offset, f[0].str == "o" ? 1 : 2, f[1].str});
      continue;
    }
    OutputEnd end{offset, "", 0, 0};
    for (size_t i = 0; i + 1 < f.size(); i += 2) {
      if (f[i].str == "end") end.end = f[i + 1].str;
      if (f[i].str == "status") end.status = std::atoi(f[i + 1].str.c_str());
      if (f[i].str == "skipped") end.skipped = std::strtoull(f[i + 1].str.c_str(), nullptr, 10);
    }
    if (!end.end.empty()) out.end = end;
  }
  return out;
}

}  // namespace

Result<std::vector<KeptRun>> kept_runs(Redis& redis, const std::string& key, TimePoint deadline,
                                       int64_t* indexed) {
  std::string index = kept_output_key(key, "outputs");
  Argv newest{"ZREVRANGE", index, "0", std::to_string(k_kept_runs - 1)};
  auto replies = redis.pipeline({newest, {"ZCARD", index}}, deadline);
  if (!replies) return replies.failure();
  for (const Reply& r : *replies)
    if (r.type == Reply::Type::error) return redis.server_failure(r.str, newest);
  const Reply* reply = &replies->front();
  if (!reply->is_array()) return unexpected_reply("the kept runs");
  if (indexed) *indexed = (*replies)[1].integer;
  std::vector<KeptRun> runs;
  for (const Reply& m : reply->elements) {
    size_t space = m.str.find(' ');
    if (space == std::string::npos) continue;
    runs.push_back({std::atoll(m.str.c_str()), decode_lock_value(m.str.substr(space + 1))});
  }
  return runs;
}

Result<OutputBounds> output_bounds(Redis& redis, const std::string& key, int64_t fence,
                                   TimePoint deadline) {
  std::string stream = stream_key(key, fence);
  auto replies = redis.pipeline(
      {{"XRANGE", stream, "-", "+", "COUNT", "1"}, {"XREVRANGE", stream, "+", "-", "COUNT", "1"}},
      deadline);
  if (!replies) return replies.failure();
  OutputBounds out;
  for (const Reply& r : *replies)
    if (r.type == Reply::Type::error) return redis.server_failure(r.str);
  auto first = decode_entries((*replies)[0], "");
  auto last = decode_entries((*replies)[1], "");
  if (!first) return first.failure();
  if (!last) return last.failure();
  if (!first->last_id.empty()) out.first = id_offset(first->last_id);
  out.end = last->end;
  return out;
}

Result<std::vector<AttemptMark>> attempt_marks(Redis& redis, const std::string& key, int64_t fence,
                                               TimePoint deadline) {
  auto reply = redis.call(
      {"ZRANGE", marks_key(key, fence), "0", std::to_string(k_marks_read_most - 1), "WITHSCORES"},
      deadline);
  if (!reply) return reply.failure();
  if (!reply->is_array()) return unexpected_reply("the attempts' marks");
  std::vector<AttemptMark> marks;
  const auto& e = reply->elements;
  for (size_t i = 0; i + 1 < e.size(); i += 2) {
    // "ATTEMPT SINCE_MS", scored by its offset.
    char* rest = nullptr;
    long attempt = std::strtol(e[i].str.c_str(), &rest, 10);
    if (attempt <= 0 || *rest != ' ') continue;
    marks.push_back({static_cast<uint64_t>(std::strtod(e[i + 1].str.c_str(), nullptr)),
                     static_cast<int>(attempt), std::strtoll(rest + 1, nullptr, 10)});
  }
  return marks;
}

Result<OutputRead> read_output(Redis& redis, const std::string& key, int64_t fence,
                               const std::string& after, size_t count, TimePoint deadline) {
  auto reply = redis.call(
      {"XRANGE", stream_key(key, fence), next_id(after), "+", "COUNT", std::to_string(count)},
      deadline);
  if (!reply) return reply.failure();
  return decode_entries(*reply, after);
}

Result<OutputRead> await_output(Redis& redis, const std::string& key, int64_t fence,
                                const std::string& after, size_t count, Millis block) {
  auto reply = redis.blocking_call({"XREAD", "COUNT", std::to_string(count), "BLOCK",
                                    std::to_string(block.count()), "STREAMS",
                                    stream_key(key, fence), after.empty() ? "0-0" : after},
                                   Clock::now() + block + redis.command_timeout(), -1);
  if (!reply) return reply.failure();
  // [[stream, entries]], or nil when nothing came.
  if (reply->is_array() && reply->elements.size() == 1 && reply->elements[0].is_array() &&
      reply->elements[0].elements.size() == 2)
    return decode_entries(reply->elements[0].elements[1], after);
  return decode_entries(Reply{}, after);
}

Result<std::optional<std::string>> resume_point(Redis& redis, const std::string& key, int64_t fence,
                                                uint64_t next, TimePoint deadline) {
  std::string stream = stream_key(key, fence);
  // Entries are "OFFSET-1": "NEXT-0" is the last ID before the entry at NEXT.
  std::string before = std::to_string(next) + "-0";
  std::string f = std::to_string(fence);
  auto replies = redis.pipeline({{"EXISTS", stream},
                                 {"ZCOUNT", kept_output_key(key, "outputs"), f, f},
                                 {"XREVRANGE", stream, before, "-", "COUNT", "1"}},
                                deadline);
  if (!replies) return replies.failure();
  for (const Reply& r : *replies)
    if (r.type == Reply::Type::error) return redis.server_failure(r.str);
  // A run that has printed nothing yet has no stream, only its place among the kept runs.
  if ((*replies)[0].integer == 0 && (*replies)[1].integer == 0) return std::optional<std::string>();
  auto last = decode_entries((*replies)[2], "");
  if (!last) return last.failure();
  if (last->last_id.empty()) return std::optional<std::string>("");
  return std::optional<std::string>(std::to_string(id_offset(last->last_id)) + "-0");
}

// Shared by the sender and its thread, which may outlive it (~OutputSender).
struct OutputSender::State {
  explicit State(uint64_t keep) : size(keep), pending(keep) {}

  Connect connect;
  std::string key, stream, index, member, fence, last_output, marks_key;
  uint64_t size = 0;
  size_t piece_bytes = k_piece_most;
  size_t send_bytes = k_send_least;  // the most one command carries
  Millis retention{0};

  std::mutex mutex;
  std::condition_variable wake;  // output came, or the run ended
  // Not in Redis yet: the newest SIZE bytes at most, a command's on their way among them.
  OutputWindow pending;
  uint64_t flight_end = 0;         // a command on its way carries the output up to here
  uint64_t flight_dropped = 0;     // of those, bytes pending dropped meanwhile: lost if it fails
  uint64_t confirmed = 0;          // Redis has the output up to here
  uint64_t skipped = 0;            // dropped unsent
  uint64_t missed = 0;             // dropped unsent while sending failed or was slow
  uint64_t dropped_in_flight = 0;  // dropped while a call was on its way: missed if it was slow
  bool failing = false;
  // A call to Redis is on its way: the run's entry, or a round of sends, which sends what was
  // pending when it began (up to round_end) in one command or more.
  std::optional<TimePoint> sending_since;
  uint64_t round_end = 0;
  bool ending = false;
  std::string end;
  int status = 0;
  TimePoint finish_by{};
  bool end_sent = false;
  Report::Unkept no_longer_kept = Report::Unkept::no;
  std::string failure;
  // Attempts' marks (--retry) not known to be in Redis, in order; the first MARKS_SENT of them
  // are on their way with a command.
  std::vector<AttemptMark> marks;
  size_t marks_sent = 0;

  void run();
  // The run's entry in the index of kept runs: the failure, if it is not known to be there.
  std::optional<Failure> enter(Redis& redis);
  // One round of sends, begun at NEXT_SEND at the earliest (then the next round's time): OVER
  // once the end is sent or the run was pushed out of those kept; FAILED when a command was
  // not (known to be) taken.
  struct Round {
    bool over = false;
    std::optional<Failure> failed;
  };
  Round send_round(Redis& redis, TimePoint& next_send);
  // BYTES of STREAM, next in the output (mutex held).
  void add(int stream, std::string_view bytes);
  // The pending bytes from FROM to TO were dropped unsent (mutex held).
  void dropped(uint64_t from, uint64_t to);
  // The next command's pieces, from the first pending byte (mutex held).
  std::vector<OutputPiece> next_batch();
  // Sends BATCH (and, with END, the end) in one command: the script's reply.
  Result<Reply> send(Redis& redis, std::vector<OutputPiece> batch, bool with_end,
                     TimePoint deadline);
  // Whether the round of sends has bytes left to send (mutex held).
  bool round_left() const { return !pending.empty() && pending.begin() < round_end; }
  // A call to Redis (a round) begins (mutex held), and has ended, answered or not (ANSWERED):
  // what was dropped meanwhile is missed when it failed or was slow.
  void call_begins() { sending_since = Clock::now(); }
  void call_ended(bool answered) {
    if (!answered || Clock::now() - *sending_since >= k_slow_send) missed += dropped_in_flight;
    dropped_in_flight = 0;
    sending_since.reset();
  }
  // Waits RETRY (less once the run ends); false when the run's end gave up on sending.
  bool wait_to_retry(std::unique_lock<std::mutex>& lock, Millis retry);
  TimePoint call_deadline(Redis& redis) {
    std::lock_guard<std::mutex> guard(mutex);
    return ending ? finish_by : Clock::now() + redis.command_timeout();
  }
};

void OutputSender::State::add(int stream, std::string_view bytes) {
  uint64_t begin = pending.begin();
  pending.add(stream, bytes);
  dropped(begin, pending.begin());
}

void OutputSender::State::dropped(uint64_t from, uint64_t to) {
  if (from >= to) return;
  // Bytes a command on its way carries are sent if it is answered: only then are they
  // counted, as skipped, when it is not.
  uint64_t flying = from < flight_end ? std::min(to, flight_end) - from : 0;
  flight_dropped += flying;
  uint64_t n = to - from - flying;
  skipped += n;
  if (sending_since)
    dropped_in_flight += n;
  else if (failing)
    missed += n;
}

std::vector<OutputPiece> OutputSender::State::next_batch() {
  // Entries of piece_bytes at most, of one stream each; at most send_bytes a command, which
  // bounds its copies, and k_send_entries: one script call holds up Redis for every other
  // client, and lines of two pipes could be many. Copied while take() waits: the ring may be
  // written over once the mutex is let go.
  std::vector<OutputPiece> batch;
  uint64_t upto = ending ? pending.end() : std::min(round_end, pending.end());
  uint64_t at = pending.begin(), most = at + send_bytes;
  while (at < std::min(upto, most) && batch.size() < k_send_entries) {
    OutputWindow::Stretch run = pending.stretch_at(at);
    uint64_t to = std::min({upto, most, run.end, at + piece_bytes});
    batch.push_back({at, run.stream, pending.bytes(at, to)});
    at = to;
  }
  flight_end = at;
  flight_dropped = 0;
  return batch;
}

Result<Reply> OutputSender::State::send(Redis& redis, std::vector<OutputPiece> batch, bool with_end,
                                        TimePoint deadline) {
  // The arguments are built in the call, not copied into it.
  ScriptCall call{&scripts::output_append,
                  {stream, index, last_output, marks_key},
                  {fence, std::to_string(size), std::to_string(retention.count())}};
  Argv& args = call.args;
  {
    std::lock_guard<std::mutex> guard(mutex);
    args.reserve(7 + 3 * (marks.size() + batch.size()));
    args.push_back(with_end ? std::to_string(pending.end()) : "");
    args.push_back(end);
    args.push_back(std::to_string(status));
    args.push_back(std::to_string(skipped));
    // An attempt's mark is a piece of field a (output_append.lua).
    for (const AttemptMark& m : marks) {
      args.push_back(std::to_string(m.offset));
      args.push_back("a");
      args.push_back(std::to_string(m.attempt) + " " +
                     (m.since_ms > 0 ? std::to_string(m.since_ms) : ""));
    }
    marks_sent = marks.size();
  }
  for (OutputPiece& p : batch) {
    args.push_back(std::to_string(p.offset));
    args.push_back(p.stream == 1 ? "o" : "e");
    args.push_back(std::move(p.bytes));
  }
  return eval(redis, call, deadline);
}

bool OutputSender::State::wait_to_retry(std::unique_lock<std::mutex>& lock, Millis retry) {
  if (!ending) wake.wait_for(lock, retry, [this] { return ending; });
  if (!ending) return true;
  // The run's end tries again soon (on a new connection: the last one timed out), until it
  // gives up.
  wake.wait_until(lock, std::min(finish_by, Clock::now() + k_end_retry));
  return Clock::now() < finish_by;
}

std::optional<Failure> OutputSender::State::enter(Redis& redis) {
  {
    std::lock_guard<std::mutex> guard(mutex);
    call_begins();
  }
  auto r = eval(redis, scripts::output_start, {index, last_output},
                {fence, member, std::to_string(k_kept_runs), std::to_string(retention.count()),
                 kept_output_key(key, "output-")},
                call_deadline(redis));
  std::lock_guard<std::mutex> guard(mutex);
  call_ended(static_cast<bool>(r));
  if (!r) return r.failure();
  return std::nullopt;
}

OutputSender::State::Round OutputSender::State::send_round(Redis& redis, TimePoint& next_send) {
  std::vector<OutputPiece> batch;
  bool with_end = false;
  {
    std::unique_lock<std::mutex> lock(mutex);
    // What was left of the round was dropped while its last command was on its way.
    if (sending_since && !ending && !round_left()) call_ended(true);
    if (!sending_since) {
      // A round begins once there is output (or an attempt's mark) and its time has come: it
      // sends all that is pending now, and what comes meanwhile waits for the next round.
      wake.wait(lock, [this] { return ending || !pending.empty() || !marks.empty(); });
      if (!ending) wake.wait_until(lock, next_send, [this] { return ending; });
      call_begins();
      round_end = pending.end();
      next_send = Clock::now() + k_send_every;
    }
    batch = next_batch();
    with_end = ending && flight_end == pending.end();
  }
  auto r = send(redis, std::move(batch), with_end, call_deadline(redis));
  std::lock_guard<std::mutex> guard(mutex);
  if (r) {
    pending.drop_to(flight_end);
    confirmed = flight_end;
    marks.erase(marks.begin(), marks.begin() + static_cast<std::ptrdiff_t>(marks_sent));
    marks_sent = 0;
  } else {
    // Not sent, or not known to be: what pending still has of it is sent again (the script
    // adds no entry twice), and what it dropped meanwhile is lost.
    skipped += flight_dropped;
    missed += flight_dropped;
  }
  flight_end = flight_dropped = 0;
  // What was dropped while a round failed, or took so long that Redis is slow, is said.
  if (!r || r->integer < 0 || with_end || !round_left()) call_ended(static_cast<bool>(r));
  if (!r) return Round{false, r.failure()};
  if (r->integer < 0) {
    no_longer_kept = r->integer == -1 ? Report::Unkept::pushed_out : Report::Unkept::index_gone;
    return Round{true, std::nullopt};
  }
  failing = false;
  end_sent = with_end;
  return Round{with_end, std::nullopt};
}

void OutputSender::State::run() {
  std::unique_ptr<Redis> redis;
  try {
    redis = connect();
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> guard(mutex);
    failing = true;
    failure = e.what();
    return;
  }
  bool entered = false;
  TimePoint next_send{};
  Millis retry = k_retry_first;
  for (;;) {
    // The run's entry first: a Redis frozen meanwhile holds up that call as it would a send.
    std::optional<Failure> failed = entered ? std::nullopt : enter(*redis);
    if (!failed) {
      entered = true;
      Round round = send_round(*redis, next_send);
      if (round.over) return;
      failed = round.failed;
      if (!failed) {
        retry = k_retry_first;
        continue;
      }
    }
    std::unique_lock<std::mutex> lock(mutex);
    failing = true;
    failure = failed->message;
    log(Level::debug, {"keep_output", key, "keeping the command's output: " + failure});
    if (!wait_to_retry(lock, retry)) return;
    retry = std::min(retry * 2, k_retry_most);
  }
}

OutputSender::OutputSender(Connect connect, const std::string& key, int64_t fence,
                           const std::string& value, uint64_t size, Millis retention)
    : state_(std::make_shared<State>(size)) {
  State& s = *state_;
  s.connect = std::move(connect);
  s.key = key;
  s.fence = std::to_string(fence);
  s.stream = stream_key(key, fence);
  s.index = kept_output_key(key, "outputs");
  s.member = s.fence + " " + value;
  s.last_output = helper_key(key, "last-output");
  s.marks_key = marks_key(key, fence);
  s.piece_bytes =
      std::clamp<size_t>(size / 16, k_piece_least + k_node_room, k_piece_most) - k_node_room;
  s.send_bytes = std::max<size_t>(size / 8, k_send_least);
  s.retention = retention;
}

OutputSender::~OutputSender() {
  if (!thread_.running()) return;
  TimePoint finish_by;
  {
    std::lock_guard<std::mutex> guard(state_->mutex);
    if (!state_->ending) {
      // Not finished (an exception): the thread gives up at once.
      state_->ending = true;
      state_->finish_by = Clock::now();
      state_->wake.notify_all();
    }
    finish_by = state_->finish_by;
  }
  // Held up on a server that does not answer: it ends by itself.
  thread_.join_by(finish_by + k_finish_margin);
}

void OutputSender::start() {
  thread_.start([state = state_] { state->run(); });
}

void OutputSender::take(int stream, std::string_view bytes) {
  if (bytes.empty()) return;
  std::lock_guard<std::mutex> guard(state_->mutex);
  State& s = *state_;
  if (s.ending) return;
  // The thread waits for a first byte, then for its next send's time: only the first wakes it.
  bool first = s.pending.empty();
  s.add(stream, bytes);
  if (first) s.wake.notify_one();
}

void OutputSender::mark_attempt(int attempt, std::optional<int64_t> since_ms) {
  std::lock_guard<std::mutex> guard(state_->mutex);
  State& s = *state_;
  if (s.ending) return;
  s.marks.push_back({s.pending.end(), attempt, since_ms.value_or(0)});
  s.wake.notify_one();
}

OutputSender::Report OutputSender::send_end(const std::string& end, int status,
                                            TimePoint deadline) {
  State& s = *state_;
  std::unique_lock<std::mutex> lock(s.mutex);
  if (!s.ending) {
    s.ending = true;
    s.end = end;
    s.status = status;
    s.finish_by = s.failing ? std::min(deadline, Clock::now() + k_failing_finish) : deadline;
    s.wake.notify_all();
  }
  if (thread_.running()) {
    TimePoint finish_by = s.finish_by;
    lock.unlock();
    thread_.wait_until(finish_by + k_finish_margin);
    lock.lock();
  }
  Report r;
  r.total = s.pending.end();
  uint64_t window = std::min(r.total, s.size);
  r.unkept = s.end_sent ? 0 : std::min(window, r.total - s.confirmed);
  r.missed = s.missed;
  r.no_longer_kept = s.no_longer_kept;
  r.end_kept = s.end_sent;
  r.failure = s.failure;
  return r;
}

}  // namespace rlock
