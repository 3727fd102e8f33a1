// A run's output kept in Redis (rlock run --keep-output SIZE), for rlock logs on any host.
//
// Keys of lock KEY (in KEY's hash slot, like the lock's other helpers; lock.h):
//   {KEY}:rlock:outputs       the runs whose output is kept: a sorted set of the newest
//                             k_kept_runs, scored by fence; a member is "FENCE " and the run's
//                             lock value (its holder: host, pid, user, since, command)
//   {KEY}:rlock:output-FENCE  that run's output: a stream whose entry IDs are byte offsets
//                             ("OFFSET-1" holds the output from its OFFSET-th byte on), field o
//                             (stdout) or e (stderr), trimmed to the last SIZE bytes; once the
//                             run has ended, its last entry has fields end (as the history says
//                             it: exited, stopped ...), status, and skipped (bytes no follower
//                             was sent: Redis was slow, or the output came faster than it is
//                             sent)
//   {KEY}:rlock:output-FENCE-attempts  where each attempt of a run under --retry began, from
//                             the second on: a sorted set of "ATTEMPT SINCE_MS" (its start,
//                             the server's clock) scored by the output's offset then
//   {KEY}:rlock:last-output   the lock's, not the output's (no rlock-output: prefix, so that an
//                             ACL that leaves the output out still shows it): when each kept
//                             run last printed, a sorted set of FENCE scored by the server's
//                             clock in ms as Redis took the bytes (docs/DESIGN.md "Kept
//                             output")
// All live as long as the lock's history (--retention). Offsets as IDs make a resend after a
// lost reply harmless (an entry already there is not added again), trimming by bytes one
// command, and every gap visible to a reader.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lock/lock_value.h"
#include "redis/redis.h"
#include "util/background_thread.h"
#include "util/clock.h"
#include "util/duration.h"
#include "util/error.h"

namespace rlock {

// How many runs of a key have their output kept: a run's start pushes the oldest out.
inline constexpr int k_kept_runs = 5;

// Bytes of a command's output from its OFFSET-th byte on, from stdout (1) or stderr (2).
struct OutputPiece {
  uint64_t offset = 0;
  int stream = 1;
  std::string bytes;
};

// How a run ended, as its output's last entry says it.
struct OutputEnd {
  uint64_t offset = 0;  // the output's length
  std::string end;      // run_end_name(): exited, signalled, stopped ...
  int status = 0;       // rlock's exit status
  uint64_t skipped = 0;
};

// Where attempt ATTEMPT of a run (--retry) began: at byte OFFSET of its output, at the server's
// SINCE_MS.
struct AttemptMark {
  uint64_t offset = 0;
  int attempt = 0;
  int64_t since_ms = 0;
};

// A run whose output is kept.
struct KeptRun {
  int64_t fence = 0;
  std::optional<LockValue> value;  // its holder, when the member decodes
};

// The runs of KEY whose output is kept, newest first: the newest k_kept_runs of the index, all
// that rlock keeps there, however many another program added. INDEXED, when given, is told how
// many the index holds.
Result<std::vector<KeptRun>> kept_runs(Redis& redis, const std::string& key, TimePoint deadline,
                                       int64_t* indexed = nullptr);

struct OutputRead {
  std::vector<OutputPiece> pieces;
  std::optional<OutputEnd> end;
  std::string last_id;  // of the last entry read: where the next read goes on
};
// The bounds of FENCE's kept output: where its first kept byte is, and how it ended, if it has.
struct OutputBounds {
  std::optional<uint64_t> first;  // the offset of the first entry kept; none: no entry yet
  std::optional<OutputEnd> end;
};
Result<OutputBounds> output_bounds(Redis& redis, const std::string& key, int64_t fence,
                                   TimePoint deadline);

// Where the attempts of FENCE's run began, from the second on, by offset: at most
// k_marks_read_most (docs/DESIGN.md, "Reads with a bound").
inline constexpr int64_t k_marks_read_most = 1000;
Result<std::vector<AttemptMark>> attempt_marks(Redis& redis, const std::string& key, int64_t fence,
                                               TimePoint deadline);

// The entries of FENCE's output after the entry AFTER ("" from the first kept), at most COUNT.
Result<OutputRead> read_output(Redis& redis, const std::string& key, int64_t fence,
                               const std::string& after, size_t count, TimePoint deadline);
// The same, waiting up to BLOCK on the server for an entry to come (XREAD BLOCK): none came
// when it returns no piece and no end.
Result<OutputRead> await_output(Redis& redis, const std::string& key, int64_t fence,
                                const std::string& after, size_t count, Millis block);

// Where to read FENCE's output on from for its bytes from offset NEXT on, after a reader lost
// sight of Redis (a failover, a restart): the ID before the last entry that begins before NEXT,
// whose end may lie past it ("" when none does: from the first kept); nothing when the output
// is gone (neither its stream nor the run's place among the kept runs is there).
Result<std::optional<std::string>> resume_point(Redis& redis, const std::string& key, int64_t fence,
                                                uint64_t next, TimePoint deadline);

// Sends a run's output to Redis as it comes, on a thread and a connection of its own, so that
// a Redis that is slow or away never holds up the command (take() never waits on it) nor the
// lease: while it cannot send, it keeps only the newest SIZE bytes, the ones to be kept, and
// drops the rest, counting them. At most one round of sends every 100 ms, of what is waiting
// then, in commands of an eighth of SIZE (at least 256 KiB), so that a command's copies of what
// it carries stay small beside SIZE: a command that prints fast costs Redis ten rounds a
// second, each at most SIZE bytes, and rlock's peak memory stays under 2 × SIZE + 8 MB
// (docs/PERFORMANCE.md "Kept output").
class OutputSender {
public:
  using Connect = std::function<std::unique_ptr<Redis>()>;
  // The run of FENCE, whose lock value (holder) is VALUE, keeps SIZE bytes for RETENTION.
  OutputSender(Connect connect, const std::string& key, int64_t fence, const std::string& value,
               uint64_t size, Millis retention);
  ~OutputSender();
  OutputSender(const OutputSender&) = delete;
  OutputSender& operator=(const OutputSender&) = delete;

  // Starts the thread, which first enters the run among the kept ones. Throws
  // std::system_error when it cannot start: the caller goes on without.
  void start();
  // BYTES of stream 1 or 2, next in the output. From any thread; never waits on Redis.
  void take(int stream, std::string_view bytes);
  // Attempt ATTEMPT of the command (--retry) begins here, after the bytes taken so far; it
  // started at the server's SINCE_MS (its history entry's), or, when that is not known
  // (--history-length 0), when Redis takes the mark: it is sent at the next round (100 ms at
  // most), with or without bytes. From any thread.
  void mark_attempt(int attempt, std::optional<int64_t> since_ms);

  struct Report {
    uint64_t total = 0;   // the output's length
    uint64_t unkept = 0;  // of its last SIZE bytes, those Redis did not get by the end
    uint64_t missed = 0;  // dropped while sending failed or was slow: no follower saw them
    // Why Redis stopped taking the output, if it did (output_append.lua): newer runs pushed
    // this one out of the kept runs, or the runs' index is gone (expired: --retention; or
    // lost: a restart without its data, a failover, FLUSHALL).
    enum class Unkept { no, pushed_out, index_gone };
    Unkept no_longer_kept = Unkept::no;
    bool end_kept = false;  // the end entry is in Redis
    std::string failure;    // the last failure to send, if any
  };
  // The output has ended, the run as END with exit status STATUS: sends what is left and the
  // end, by DEADLINE (sooner when sending was failing: Redis is away), and says how it went.
  Report send_end(const std::string& end, int status, TimePoint deadline);

  struct State;  // what the thread works with (kept_output.cpp)

private:
  std::shared_ptr<State> state_;
  BackgroundThread thread_;
};

}  // namespace rlock
