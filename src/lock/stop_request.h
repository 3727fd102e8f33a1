// Stop requests (rlock stop): an operator on any host asks the holder of a lock to stop its
// command, and the holder acts within a second, however long its renewals are apart.
//
// Keys of lock KEY (in KEY's hash slot, like the lock's other helpers; lock.h):
//   {KEY}:rlock:stop-TOKEN      the requests to the holder of TOKEN, in the order they came: a
//                               list, which that holder's rlock BLPOPs while its command runs
//                               (StopListener), so that a holder nobody asks sends Redis nothing
//                               more. It expires when its last asker stops waiting (stop.lua).
//   {KEY}:rlock:stopping-TOKEN-ID  the holder's answer to asker ID, which that asker BLPOPs:
//                               pushed only while the asker still waits (stop_answer.lua), so
//                               that a holder that comes back later never acts on a request
//                               given up on. Each asker has its own, so that operators who ask
//                               at the same moment are each answered: the first request taken
//                               is acted on, and every later one is told whose that was.
// The lock given back is the end.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redis/redis.h"
#include "util/background_thread.h"
#include "util/clock.h"
#include "util/duration.h"
#include "util/error.h"
#include "util/fd.h"

namespace rlock {

struct StopRequest {
  std::string by;      // USER@HOST of whoever asked
  std::string at;      // when, by the server's clock (RFC 3339)
  std::string reason;  // --reason, or empty
  int signal = 0;      // --signal: the holder's --kill-signal instead (0: the holder's own)
  std::optional<Millis> kill_after;  // --kill-after: the holder's own instead
  int64_t until_ms = 0;  // the server's clock when the asker gives up waiting for an answer
  // The asker's, a token's form: its answer list is stopping-TOKEN-ID. Empty from an rlock
  // before per-asker answers, answered on stopping-TOKEN.
  std::string id;
};

// "by=alice@ops-1 at=... until=... signal=15 kill_after=5000 id=3f2a... reason=db maintenance":
// the reason last, as it may hold spaces; the others never do. A request whose id has not a
// token's form (is_token: it names a key) is refused; one without (an older rlock's) is read.
std::string encode_stop_request(const StopRequest& request);
std::optional<StopRequest> decode_stop_request(std::string_view text);

// "alice@ops-1: db maintenance", or "alice@ops-1" without a reason: who stopped a run, and why.
std::string stopped_by_text(const std::string& by, const std::string& reason);

// A holder asked to stop (ask_to_stop).
struct StopAsked {
  std::string token;
  std::string value;  // its lock value
  Millis pttl{0};     // its lease left on the server
};
struct StopAsk {
  // string (held alone), semaphore, shared; none (free), broken (a tombstone of release
  // --force), foreign (no rlock lock: TYPE in foreign_type, a plain string's value in value).
  std::string kind;
  std::vector<StopAsked> asked;  // empty: no holder (or not TOKEN's)
  std::string value;
  std::string foreign_type;
  Millis broken_pttl{-1};  // broken: the tombstone's time left
};

// Asks the holders of KEY (only TOKEN's, when not empty) to stop, with REQUEST; each request
// is given up on ANSWER_WITHIN from now, by the server's clock. Under Redlock every node gets
// it. Sent again, the holder acts on its asker's request once however often it comes
// (StopListener): a failover is ridden out by asking again (rlock stop).
Result<StopAsk> ask_to_stop(Redis& redis, const std::string& key, const std::string& token,
                            const StopRequest& request, Millis answer_within, TimePoint deadline);

// A holder's answer to one asker.
struct StopAnswer {
  std::string token;  // the holder's
  TimePoint at;       // when it came
  // The request the holder had taken before this asker's, when it had: it was stopping already,
  // at the word of that request's asker, and this one's is not acted on.
  std::optional<StopRequest> before;
};

// Waits until UNTIL for the answers to asker ID of the holders of TOKENS: those that answered.
// INTERRUPT_FD (when not -1) readable first: a failure of kind interrupted.
Result<std::vector<StopAnswer>> await_stop_answers(Redis& redis, const std::string& key,
                                                   const std::string& id,
                                                   std::vector<std::string> tokens, TimePoint until,
                                                   int interrupt_fd);

// Takes back asker ID's requests to the holders of TOKENS that have not taken them yet, so
// that none acts on a request its asker gave up on (interrupted); other askers' stay.
Result<Unit> withdraw_stop_requests(Redis& redis, const std::string& key, const std::string& id,
                                    const std::vector<std::string>& tokens, TimePoint deadline);

// Listens for a stop request to the holder of TOKEN, on a thread and a connection of its own
// (CONNECT makes it there, and may own nothing of the caller's: the thread may outlive it),
// from DELAY after start() on: a command that ends sooner never costs Redis a connection, and
// a request made meanwhile waits in its list. wake_fd() becomes readable when a request came;
// take() returns it. Once one is taken, it goes on listening and answers every later request
// with that one, so that their askers are told at once who stopped the run, and none waits for
// an answer that never comes. Destruction ends the wait: the thread is joined, unless it is
// held up on a server that does not answer (a Cluster's map being read again, a Sentinel
// failover), which would hold up the run's end: then it is left to end by itself, with the
// state it shares.
// rlock stop's requests as rlock run's supervisor hears them: StopListener, or a fake in the
// unit tests.
class StopRequests {
public:
  virtual ~StopRequests() = default;
  // Readable when a request came.
  virtual int wake_fd() const = 0;
  // The request that came, once (drains wake_fd()).
  virtual std::optional<StopRequest> take() = 0;
};

class StopListener : public StopRequests {
public:
  using Connect = std::function<std::unique_ptr<Redis>()>;
  StopListener(Connect connect, std::string key, std::string token, Millis delay);
  ~StopListener();
  StopListener(const StopListener&) = delete;
  StopListener& operator=(const StopListener&) = delete;

  // Throws std::system_error when the thread cannot start (ulimit -u): the caller goes on
  // without (a stop is then not heard).
  void start();
  int wake_fd() const override;
  std::optional<StopRequest> take() override;

  struct State;  // what the thread works with (stop_request.cpp)

private:
  std::shared_ptr<State> state_;
  BackgroundThread thread_;
};

}  // namespace rlock
