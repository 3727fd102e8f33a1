// rlock logs KEY: the output a run kept (rlock run --keep-output; kept_output.h), from any host;
// with -f, as it comes.
#include <poll.h>

#include <algorithm>
#include <cstdlib>

#include "lock/held_lock.h"
#include "lock/kept_output.h"
#include "lock/lock_state.h"
#include "print/print.h"
#include "print/print_text.h"
#include "redis/connection.h"
#include "redis/retry.h"
#include "settings/options.h"
#include "util/byte_size.h"
#include "util/log.h"
#include "util/stderr_writer.h"
#include "util/text.h"
#include "verbs/command.h"
#include "verbs/verbs.h"

namespace rlock {

namespace {

// How many entries one read asks for: at most 64 KiB each.
constexpr size_t k_read_count = 64;
// How long one XREAD of -f blocks on the server before rlock looks whether the run still
// holds the lock (a run whose rlock was killed never writes its end).
constexpr Millis k_follow_slice{5000};
// How long -f waits at least for a Redis that does not answer (a restart, a failover): longer
// when the run's ttl is, by the time its rlock takes to give the lock back.
constexpr Millis k_follow_outage_least{30000};
// How long the output waits for the header to be written first.
constexpr Millis k_header_patience{100};

struct LogsOptions {
  std::optional<int> run;        // --run N: the Nth newest kept run
  std::optional<int64_t> fence;  // --fence F
  bool follow = false;
  bool raw = false;
};

// Prints pieces of one run's output, escaped unless --raw, and says where bytes are missing and
// where each attempt (--retry) began.
class Printer {
public:
  Printer(const std::string& key, bool raw) : key_(key), raw_(raw) {}

  void print(const OutputRead& read) {
    std::string out;
    for (const OutputPiece& p : read.pieces) {
      if (next_ && p.offset > *next_)
        gap(out, p.offset - *next_,
            "not kept here (Redis was slow or away, or the output came "
            "faster than it was sent)");
      // Bytes shown already (an rlock before output_append.lua cut resent pieces) are not
      // shown twice.
      uint64_t end = p.offset + p.bytes.size();
      if (next_ && end <= *next_) continue;
      std::string_view bytes = p.bytes;
      uint64_t at = p.offset;
      if (next_ && p.offset < *next_) {
        bytes.remove_prefix(*next_ - p.offset);
        at = *next_;
      }
      // An attempt that began within the piece: its bytes before the mark go out first.
      while (next_mark_ < marks_.size() && marks_[next_mark_].offset < end) {
        uint64_t upto = std::max(at, marks_[next_mark_].offset);
        out += shown(bytes.substr(0, upto - at));
        bytes.remove_prefix(upto - at);
        at = upto;
        mark(out, marks_[next_mark_++]);
      }
      out += shown(bytes);
      next_ = end;
    }
    if (read.end && next_ && read.end->offset > *next_)
      gap(out, read.end->offset - *next_, "at the end not kept (Redis was away)");
    // Attempts that began where the output so far ends: they have printed nothing yet.
    uint64_t reached = read.end ? read.end->offset : next_.value_or(0);
    while (next_mark_ < marks_.size() && marks_[next_mark_].offset <= reached)
      mark(out, marks_[next_mark_++]);
    if (read.end && !raw_) out += escaper_.finish();
    if (!out.empty()) write_stdout(out);
  }
  // The output kept begins at OFFSET: of the attempts that began before, the last one's mark
  // is shown there.
  void from(uint64_t offset) {
    next_ = offset;
    while (next_mark_ + 1 < marks_.size() && marks_[next_mark_].offset < offset &&
           marks_[next_mark_ + 1].offset <= offset)
      ++next_mark_;
  }
  // Where the output shown so far ends; nothing before any was.
  std::optional<uint64_t> shown_to() const { return next_; }
  // Where the attempts began (attempt_marks()), before from(); read again, the same marks and
  // any since.
  void attempts(std::vector<AttemptMark> marks) { marks_ = std::move(marks); }

private:
  std::string shown(std::string_view bytes) {
    return raw_ ? std::string(bytes) : escaper_.feed(bytes);
  }
  // Said on stderr, in its place among the output: what went before goes out first.
  void gap(std::string& out, uint64_t bytes, const std::string& why) {
    say(out, format_byte_size(bytes) + " " + why);
  }
  // On stderr too, never among the command's bytes on stdout (--raw leaves those untouched),
  // and waited for, so that a terminal that shows both shows it in its place.
  void mark(std::string& out, const AttemptMark& m) {
    std::string since =
        m.since_ms > 0 ? " (started " + format_rfc3339(WallTime(Millis(m.since_ms))) + ")" : "";
    say(out, "--- attempt " + std::to_string(m.attempt) + since + " ---");
    flush_stderr(k_header_patience);
  }
  void say(std::string& out, const std::string& what) {
    if (!raw_) out += escaper_.finish();
    if (!out.empty()) write_stdout(out);
    out.clear();
    write_stderr("rlock: " + printable_key(key_) + ": " + what + "\n");
  }

  const std::string& key_;
  bool raw_;
  OutputEscaper escaper_;
  std::optional<uint64_t> next_;  // where the next piece should begin
  std::vector<AttemptMark> marks_;
  size_t next_mark_ = 0;  // the first mark not shown
};

// "ended: exit 3", "stopped (80)" ...: END as the history says a run's end.
std::string end_text(const OutputEnd& end) {
  RunRecord r;
  r.end = end.end;
  r.exit_status = end.status;
  return result_text(r);
}

// Whether the run of FENCE still holds KEY; nothing when Redis cannot say.
std::optional<bool> still_held(Redis& redis, const std::string& key, int64_t fence) {
  auto states = read_locks(redis, {key});
  if (!states || states->empty()) return std::nullopt;
  for (int64_t f : held_fences(states->front()))
    if (f == fence) return true;
  return false;
}

// KEY's run of fence F on web-1 pid 412 (report.sh), started ...: exit 3; the last 1.0 MiB of
// 3.2 MiB kept.
// RUNNING: whether the run still holds the lock, when it kept no end (nothing: unknown).
std::string header(const std::string& key, const KeptRun& run, const OutputBounds& b,
                   std::optional<bool> running) {
  std::string out = printable_key(key) + ": run of fence " + std::to_string(run.fence);
  if (run.value) {
    const Holder& h = run.value->holder;
    out += " on " + printable(h.host) + " pid " + std::to_string(h.pid) + " (" + printable(h.cmd) +
           "), started " + format_rfc3339(h.since);
  }
  uint64_t first = b.first.value_or(0);
  if (b.end) {
    out += ": " + end_text(*b.end);
    uint64_t total = b.end->offset;
    out += total == 0   ? "; it printed nothing"
           : first == 0 ? "; all of its " + format_byte_size(total) + " kept"
                        : "; its last " + format_byte_size(total - first) + " of " +
                              format_byte_size(total) + " kept";
  } else {
    out += running == true    ? ": running"
           : running == false ? ": no end kept (its rlock was killed, or Redis lost the end)"
                              : ": running, or its rlock ended without a word";
    if (first > 0) out += "; the first " + format_byte_size(first) + " not kept";
  }
  return out;
}

// The index of kept outputs holds INDEXED runs, more than rlock keeps: another program added
// them, and only the newest were read (docs/DESIGN.md, "Reads with a bound").
void say_index_unread(const std::string& key, int64_t indexed) {
  write_stderr("rlock: " + printable_key(key) + ": the index of kept outputs holds " +
               std::to_string(indexed) + " runs, of which rlock keeps " +
               std::to_string(k_kept_runs) + ": only the newest " + std::to_string(k_kept_runs) +
               " were read\n");
}

// The run of RUNS that O asks for (--fence, --run, else the newest); nullptr when none is.
const KeptRun* chosen_run(const std::vector<KeptRun>& runs, const LogsOptions& o) {
  if (o.fence) {
    for (const KeptRun& r : runs)
      if (r.fence == *o.fence) return &r;
    return nullptr;
  }
  if (o.run) return static_cast<size_t>(*o.run) <= runs.size() ? &runs[*o.run - 1] : nullptr;
  return &runs.front();
}

// A run keeps at most k_max_keep_output bytes (--keep-output): a stream that holds more is not
// all rlock's, and its reading stops there (docs/DESIGN.md, "Reads with a bound"), saying what
// was left unread, from READ's last entry to the end that BOUNDS found.
int stop_reading(const std::string& key, const OutputRead& read, const OutputBounds& bounds) {
  uint64_t at =
      read.pieces.empty() ? 0 : read.pieces.back().offset + read.pieces.back().bytes.size();
  std::string rest = bounds.end && bounds.end->offset > at
                         ? format_byte_size(bounds.end->offset - at) + " from byte "
                         : "the rest, from byte ";
  write_stderr("rlock: " + printable_key(key) + ": stopped after " +
               format_byte_size(k_max_keep_output) + ", the most a run keeps (--keep-output): " +
               rest + std::to_string(at) + " on, was not written by rlock run and is not shown\n");
  return k_exit_ok;
}

// Reads where the attempts of FENCE's run began (--retry) into PRINTER: a run that still runs
// sends its marks with its output, so again before each read's printing. What failed, if any.
std::optional<Failure> read_attempts(Redis& redis, const std::string& key, int64_t fence,
                                     Printer& printer) {
  auto marks = attempt_marks(redis, key, fence, Clock::now() + redis.command_timeout());
  if (!marks) return marks.failure();
  printer.attempts(std::move(*marks));
  return std::nullopt;
}

// -f through Redis going away (rlock-logs(1)): a connection cut as -f waits on it (a proxy's
// idle timeout) is replaced at once and without a word; an outage (a restart, a failover) is
// said once, with how long -f waits for Redis to answer again, and said over when it does.
// Past that bound -f gives up (69): the run's rlock, unable to renew, has ended the run too.
class Outage {
public:
  Outage(const std::string& key, Millis bound) : key_(key), bound_(bound) {}

  // After FAILURE of a command that had waited WAITED on the server: nothing when -f should
  // try again (it has paused, if it should), else the exit status to end with. A connection
  // closed under a read that had waited a while is a cut (a proxy cuts a blocked read as it
  // cuts an idle connection): tried again at once, unsaid. One closed as soon as it is used is
  // not (a proxy that does not pass XREAD): an outage, paused and bounded like any other.
  std::optional<int> ride_out(const Failure& failure, Millis waited) {
    if (!worth_retrying(failure)) return unavailable(failure);
    TimePoint now = Clock::now();
    if (dropped(failure) && waited >= k_idle_check_after && !said_) {
      since_ = now;
      return std::nullopt;
    }
    if (!since_) since_ = now;
    if (!said_) {
      write_stderr("rlock: " + printable_key(key_) + ": Redis unreachable (" + failure.message +
                   "); following on once it answers, for up to " + format_duration(bound_) + "\n");
      said_ = true;
    }
    if (now - *since_ >= bound_) {
      write_stderr("rlock: " + printable_key(key_) + ": Redis unreachable for " +
                   format_duration(bound_) +
                   ": stopped following (the run ended, unless only this host lost Redis)\n");
      return k_exit_unavailable;
    }
    ::poll(nullptr, 0, static_cast<int>(backoff_.next().count()));
    return std::nullopt;
  }
  // A read sent at SENT was answered: an outage said is said over.
  void over(TimePoint sent) {
    if (said_)
      write_stderr("rlock: " + printable_key(key_) + ": Redis answers again after " +
                   format_duration(std::chrono::duration_cast<Millis>(sent - *since_)) +
                   ": following on\n");
    since_.reset();
    said_ = false;
    backoff_.reset();
  }

private:
  const std::string& key_;
  Millis bound_;
  std::optional<TimePoint> since_;  // Redis has failed since
  bool said_ = false;
  Backoff backoff_;
};

// -f: the output of the run of FENCE as it comes after what was read, until the run ends.
class Follower {
public:
  Follower(Redis& redis, const std::string& key, int64_t fence, OutputRead read, Printer& printer,
           Millis outage_bound)
      : redis_(redis), key_(key), fence_(fence), read_(std::move(read)), printer_(printer),
        outage_(key, outage_bound) {}

  int follow() {
    for (;;) {
      waited_ = Millis(0);
      auto done = step();
      if (done && *done) return **done;
      if (done) continue;
      if (auto status = outage_.ride_out(done.failure(), waited_)) return *status;
      lost_sight_ = true;
    }
  }

private:
  // One wait for more output and what it brought: the exit status once -f is over.
  Result<std::optional<int>> step() {
    if (lost_sight_) {
      // What Redis held when -f last read it may not be what it holds now (a failover to a
      // replica that lagged, a restart): back to the last entry that may hold bytes not shown.
      auto from = resume_point(redis_, key_, fence_, printer_.shown_to().value_or(0), deadline());
      if (!from) return from.failure();
      lost_sight_ = false;
      if (!*from) {
        write_stderr("rlock: " + printable_key(key_) +
                     ": Redis lost the run's output while it was away (it restarted without its "
                     "data, or failed over to a replica without it): nothing more to follow\n");
        return std::optional<int>(k_exit_not_held);
      }
      read_.last_id = **from;
    }
    TimePoint sent = Clock::now();
    auto more = await_output(redis_, key_, fence_, read_.last_id, k_read_count, k_follow_slice);
    waited_ = std::chrono::duration_cast<Millis>(Clock::now() - sent);
    if (!more) return more.failure();
    // The outage, if any, ends with a read that waited for output: one that is cut at once
    // every time (a proxy that does not pass XREAD) never ends it, and -f gives up in time.
    outage_.over(sent);
    if (auto shown = show(std::move(*more)); !shown || *shown) return shown;
    if (!read_.pieces.empty()) return std::optional<int>();
    // Nothing came for a while: a run whose rlock died holds the lock no longer, and says no
    // more.
    if (still_held(redis_, key_, fence_) != false) return std::optional<int>();
    auto again = read_output(redis_, key_, fence_, read_.last_id, k_read_count, deadline());
    if (!again) return again.failure();
    if (!again->pieces.empty() || again->end) return show(std::move(*again));
    write_stderr("rlock: " + printable_key(key_) +
                 ": the run no longer holds the lock and kept no end: its rlock was killed, "
                 "or Redis lost the end\n");
    return std::optional<int>(k_exit_ok);
  }

  // Prints READ (the attempts' marks read again first): the exit status when the run ended.
  Result<std::optional<int>> show(OutputRead read) {
    std::string last = read_.last_id;
    read_ = std::move(read);
    if (read_.last_id.empty()) read_.last_id = last;
    if (auto failed = read_attempts(redis_, key_, fence_, printer_)) return *failed;
    printer_.print(read_);
    if (!read_.end) return std::optional<int>();
    write_stderr("rlock: " + printable_key(key_) + ": the run ended: " + end_text(*read_.end) +
                 "\n");
    return std::optional<int>(k_exit_ok);
  }

  TimePoint deadline() const { return Clock::now() + redis_.command_timeout(); }

  Redis& redis_;
  const std::string& key_;
  int64_t fence_;
  OutputRead read_;
  Printer& printer_;
  Outage outage_;
  bool lost_sight_ = false;  // Redis failed since the last read
  Millis waited_{0};         // how long the last step's blocking read waited
};

int logs_verb(const GlobalOptions& global, const std::string& key, const LogsOptions& o) {
  auto redis = connect_redis(global);
  auto deadline = [&] { return Clock::now() + redis->command_timeout(); };
  int64_t indexed = 0;
  auto runs = kept_runs(*redis, key, deadline(), &indexed);
  if (!runs) return unavailable(runs.failure());
  if (indexed > k_kept_runs) say_index_unread(key, indexed);
  if (runs->empty()) {
    write_stderr("rlock: " + printable_key(key) +
                 ": no output kept (a run keeps its own with --keep-output SIZE)\n");
    return k_exit_not_held;
  }
  const KeptRun* run = chosen_run(*runs, o);
  if (!run) {
    write_stderr("rlock: " + printable_key(key) + ": " +
                 (o.fence ? "no output kept of fence " + std::to_string(*o.fence)
                          : "only " + std::to_string(runs->size()) + " runs' output kept") +
                 " (newest first: fence " + std::to_string(runs->front().fence) + ")\n");
    return k_exit_not_held;
  }
  auto bounds = output_bounds(*redis, key, run->fence, deadline());
  if (!bounds) return unavailable(bounds.failure());
  std::optional<bool> running;
  if (!bounds->end) running = still_held(*redis, key, run->fence);
  write_stderr(header(key, *run, *bounds, running) + "\n");
  flush_stderr(k_header_patience);  // before the output, on a terminal that shows both

  Printer printer(key, o.raw);
  if (auto failed = read_attempts(*redis, key, run->fence, printer)) return unavailable(*failed);
  if (bounds->first) printer.from(*bounds->first);
  OutputRead read;
  uint64_t shown = 0;
  do {
    if (shown >= k_max_keep_output) return stop_reading(key, read, *bounds);
    auto more = read_output(*redis, key, run->fence, read.last_id, k_read_count, deadline());
    if (!more) return unavailable(more.failure());
    read = std::move(*more);
    for (const OutputPiece& piece : read.pieces) shown += piece.bytes.size();
    // A run that still runs may have begun another attempt since the marks were read.
    if (!bounds->end)
      if (auto failed = read_attempts(*redis, key, run->fence, printer))
        return unavailable(*failed);
    printer.print(read);
  } while (read.pieces.size() + (read.end ? 1 : 0) == k_read_count);
  if (read.end || bounds->end || !o.follow) return k_exit_ok;
  // Redis away longer than the run's ttl, the run has ended: its rlock could not renew.
  Millis ttl{run->value && run->value->ttl_ms ? *run->value->ttl_ms : 0};
  return Follower(*redis, key, run->fence, std::move(read), printer,
                  std::max(k_follow_outage_least, ttl + k_release_budget))
      .follow();
}

struct LogsArgs : Arguments {
  std::string key;
  std::optional<int> nth;
  std::optional<std::string> fence;
  bool follow = false, raw = false;

  int run(const Invocation& in) override {
    LogsOptions o{nth, std::nullopt, follow, raw};
    if (nth && fence) throw usage_error("give --run or --fence, not both");
    if (fence) {
      char* end = nullptr;
      long long f = std::strtoll(fence->c_str(), &end, 10);
      if (fence->empty() || *end || f <= 0)
        throw usage_error("--fence: '" + printable(*fence) + "' is not a fence (a number " +
                          "history shows)");
      o.fence = f;
    }
    try {
      return logs_verb(in.resolved.global, in.key(key), o);
    } catch (const StdoutClosed&) {
      return k_exit_ok;  // `rlock logs k | head`: its reader has what it wanted
    }
  }
};

constexpr Option k_options[] = {
    option<&LogsArgs::key>("KEY", k_key_help).must(),
    option<&LogsArgs::nth>("--run", "the Nth newest run (default 1, the latest)", "N")
        .range(1, k_kept_runs),
    option<&LogsArgs::fence>("--fence", "the run of fence FENCE (history shows it)", "FENCE"),
    option<&LogsArgs::follow>("-f,--follow", "print the output as it comes, until the run ends"),
    option<&LogsArgs::raw>("--raw", "print control characters as they are, not escaped (\\x1b)")};

}  // namespace

constexpr Command k_logs_command = {
    "logs",
    "print the output a run kept (run --keep-output), from any host",
    "KEY [--run N | --fence F] [-f] [--raw]",
    {k_options, k_output, k_connection},
    "The output goes to stdout, control characters escaped (--raw: as they are); the run's\n"
    "host, fence and end go to stderr first. The output of the last 5 runs is kept.\n"
    "Examples:\n"
    "  rlock logs lock:daily-report\n"
    "  rlock logs --raw lock:daily-report\n"
    "Exit status: 0 printed, 1 no output kept (of that run), 69 Redis unreachable; 64 usage, "
    "78 configuration, 125 rlock failed.",
    make_arguments<LogsArgs>};

}  // namespace rlock
