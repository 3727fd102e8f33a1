#include "lock/stop_request.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <set>

#include "lock/lock.h"
#include "lock/lock_value.h"
#include "lock/scripts.h"
#include "redis/redlock.h"
#include "redis/retry.h"
#include "util/log.h"
#include "util/resources.h"

namespace rlock {

namespace {

// How long one BLPOP of the listener blocks on the server before it is sent again. A request
// arrives at once whatever this is; it bounds only how long a listener stays with a server
// that stopped answering without closing its connection (a frozen Cluster master replaced by
// its replica), and the cost is one command a minute.
constexpr Millis k_listen_slice{60000};
// Under Redlock, how often an asker looks for its answers (no node can wake it).
constexpr Millis k_answer_look{50};
// Under Redlock, how often a listener looks on every node for a request (the asker writes it to
// each): no one node can wake it, and one that is frozen must not keep it deaf.
constexpr Millis k_listen_look{250};
// The most requests a Redlock listener reads of one node's list at a look (a few askers at most).
const std::string k_requests_read_most = "99";
// How long the end of a run waits for the listener's thread to end: at once, as everything it
// waits on watches its end (a connection being made too), unless it is held up on a server
// that does not answer (a Cluster's map read again, a Sentinel failover): then it is left to
// end by itself, with its state and settings its own.
constexpr Millis k_join_patience{1000};
// How long a holder sends its answer again while sending fails (a failover): as long as an
// asker waits for one at most (rlock stop's 5 s).
constexpr Millis k_answer_resend_within{5000};
// After a failure, how soon the listener connects again, doubling up to the most.
constexpr Millis k_listen_retry_first{250};
constexpr Millis k_listen_retry_most{5000};

std::string list_key(const std::string& key, const std::string& token) {
  return helper_key(key, "stop-") + token;
}

// Where the holder of TOKEN answers asker ID; an asker without an id (an rlock from before
// per-asker answers, on a host not yet upgraded) on the one list per holder it watches.
std::string answer_key(const std::string& key, const std::string& token, const std::string& id) {
  std::string list = helper_key(key, "stopping-") + token;
  return id.empty() ? list : list + "-" + id;
}

// The lists an asker watches for a holder's answer: its own, and the one an older holder
// answers every asker on, so that a host not yet upgraded is not taken for away.
std::array<std::string, 2> answer_lists(const std::string& key, const std::string& token,
                                        const std::string& id) {
  return {answer_key(key, token, id), answer_key(key, token, "")};
}

// The answers a holder gives (stop_answer.lua): its asker's request taken, or another's taken
// before, followed by that request.
constexpr std::string_view k_answer_taken = "taken";
constexpr std::string_view k_answer_stopping = "stopping ";

Result<StopAsk> decode_ask(const Reply& reply) {
  if (!reply.is_array() || reply.elements.empty()) return unexpected_reply("the stop script");
  const auto& e = reply.elements;
  StopAsk out;
  out.kind = e[0].str;
  if (out.kind == "broken" && e.size() >= 3) {
    out.value = e[1].str;
    out.broken_pttl = Millis(e[2].integer);
  }
  if (out.kind == "foreign" && e.size() >= 2) {
    out.foreign_type = e[1].str;
    if (e.size() >= 3) out.value = e[2].str;
    return out;
  }
  if (out.kind == "string" || out.kind == "semaphore" || out.kind == "shared")
    for (size_t i = 1; i + 2 < e.size(); i += 3)
      out.asked.push_back({e[i].str, e[i + 1].str, Millis(e[i + 2].integer)});
  return out;
}

}  // namespace

std::string encode_stop_request(const StopRequest& r) {
  std::string out = "by=" + r.by + " at=" + r.at + " until=" + std::to_string(r.until_ms) +
                    " signal=" + std::to_string(r.signal);
  if (r.kill_after) out += " kill_after=" + std::to_string(r.kill_after->count());
  if (!r.id.empty()) out += " id=" + r.id;
  return out + " reason=" + r.reason;
}

std::optional<StopRequest> decode_stop_request(std::string_view text) {
  StopRequest r;
  bool reason = false;
  while (!text.empty() && !reason) {
    size_t space = text.find(' ');
    std::string_view field = text.substr(0, space);
    size_t eq = field.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    std::string_view name = field.substr(0, eq);
    std::string value(field.substr(eq + 1));
    if (name == "reason") {
      r.reason = std::string(text.substr(eq + 1));  // the rest, spaces and all
      reason = true;
    } else if (name == "by") {
      r.by = value;
    } else if (name == "at") {
      r.at = value;
    } else if (name == "until") {
      r.until_ms = std::atoll(value.c_str());
    } else if (name == "signal") {
      r.signal = std::atoi(value.c_str());
    } else if (name == "kill_after") {
      r.kill_after = Millis(std::atoll(value.c_str()));
    } else if (name == "id") {
      r.id = value;
    }
    text = space == std::string_view::npos ? std::string_view{} : text.substr(space + 1);
  }
  if (r.by.empty() || (!r.id.empty() && !is_token(r.id)) || r.signal < 0 || r.signal >= 65)
    return std::nullopt;
  return r;
}

std::string stopped_by_text(const std::string& by, const std::string& reason) {
  return reason.empty() ? by : by + ": " + reason;
}

Result<StopAsk> ask_to_stop(Redis& redis, const std::string& key, const std::string& token,
                            const StopRequest& request, Millis answer_within, TimePoint deadline) {
  Argv keys{key, helper_key(key, "sem"), helper_key(key, "holders"), helper_key(key, "shared"),
            helper_key(key, "shared-values")};
  Argv args{helper_key(key, "stop-"), encode_stop_request(request), token,
            std::to_string(std::max<int64_t>(1, answer_within.count())), "0"};
  if (redis.node_count() == 1) {
    auto reply = eval(redis, scripts::stop, keys, args, deadline);
    if (!reply) return reply.failure();
    return decode_ask(*reply);
  }
  // Redlock: each node holds its own copy of the lock, and the holder looks on every node, one
  // of which may have missed its copy (a restart without data): a holder found on any node is
  // asked on every node. The answer is that of the nodes that have the holder; "nothing to
  // stop" only from a quorum.
  auto replies = eval_on_all(redis, scripts::stop, keys, args, deadline,
                             quorum_then_the_rest(redis.node_count()));
  std::optional<StopAsk> best;
  std::optional<Failure> failure;
  size_t answered = 0;
  std::vector<std::vector<std::string>> asked_on(replies.size());
  for (size_t i = 0; i < replies.size(); ++i) {
    if (!replies[i]) {
      failure = replies[i].failure();
      continue;
    }
    ++answered;
    auto ask = decode_ask(*replies[i]);
    if (!ask) return ask.failure();
    for (const StopAsked& a : ask->asked) asked_on[i].push_back(a.token);
    if (!best || (best->asked.empty() && !ask->asked.empty())) best = *ask;
  }
  if (!best) return *failure;
  if (best->asked.empty() && answered < redlock_quorum(redis.node_count()))
    return Failure{failure->kind,
                   "no holder found on the " + std::to_string(answered) + " of " +
                       std::to_string(redis.node_count()) +
                       " Redlock nodes that answered, fewer than a quorum: " + failure->message};
  for (size_t i = 0; i < replies.size(); ++i) {
    if (!replies[i]) continue;
    for (const StopAsked& a : best->asked) {
      if (std::find(asked_on[i].begin(), asked_on[i].end(), a.token) != asked_on[i].end()) continue;
      Argv everywhere = args;
      everywhere[2] = a.token;
      everywhere.back() = "1";
      (void)eval(redis.node(i), scripts::stop, keys, everywhere, deadline);
    }
  }
  return *best;
}

Result<std::vector<StopAnswer>> await_stop_answers(Redis& redis, const std::string& key,
                                                   const std::string& id,
                                                   std::vector<std::string> tokens, TimePoint until,
                                                   int interrupt_fd) {
  std::vector<StopAnswer> answered;
  while (!tokens.empty()) {
    TimePoint now = Clock::now();
    if (now >= until) break;
    Millis left = std::chrono::ceil<Millis>(until - now);
    std::optional<std::pair<std::string, std::string>> got;  // whose answer came, and what
    if (redis.node_count() == 1) {
      Argv pop{"BLPOP"};
      for (const std::string& t : tokens)
        for (std::string& list : answer_lists(key, t, id)) pop.push_back(std::move(list));
      pop.push_back(std::to_string(left.count() / 1000.0));
      auto r = redis.blocking_call(pop, until + redis.command_timeout(), interrupt_fd);
      if (!r) return r.failure();
      if (r->is_array() && r->elements.size() == 2)
        got.emplace(r->elements[0].str, r->elements[1].str);
    } else {
      // Redlock: no blocking command (a node's list is its own): every node is looked at at
      // once, and the look ends with the first answer (on the node the holder listens on), or
      // when every node said none, or at the slice's end, a node that is away or frozen
      // passed over.
      std::vector<Argv> pops;
      for (const std::string& t : tokens)
        for (std::string& list : answer_lists(key, t, id))
          pops.push_back({"LPOP", std::move(list)});
      auto an_answer = [](const Reply& r) { return r.is_string(); };
      auto looked = redis.broadcast(pops, std::min(until, now + redis.command_timeout()), {},
                                    Enough{1, an_answer});
      for (const auto& replies : looked)
        for (size_t j = 0; replies && j < replies->size() && !got; ++j)
          if ((*replies)[j].is_string()) got.emplace(pops[j][1], (*replies)[j].str);
      pollfd p{interrupt_fd, POLLIN, 0};
      if (!got && ::poll(&p, interrupt_fd < 0 ? 0 : 1,
                         static_cast<int>(std::min(left, k_answer_look).count())) > 0)
        return Failure{Failure::Kind::interrupted, redis.name() + ": interrupted"};
    }
    auto it = std::find_if(tokens.begin(), tokens.end(), [&](const std::string& t) {
      auto lists = answer_lists(key, t, id);
      return got && std::find(lists.begin(), lists.end(), got->first) != lists.end();
    });
    if (it == tokens.end()) continue;
    StopAnswer answer{*it, Clock::now(), std::nullopt};
    if (got->second.starts_with(k_answer_stopping))
      answer.before =
          decode_stop_request(std::string_view(got->second).substr(k_answer_stopping.size()));
    answered.push_back(std::move(answer));
    tokens.erase(it);
  }
  return answered;
}

Result<Unit> withdraw_stop_requests(Redis& redis, const std::string& key, const std::string& id,
                                    const std::vector<std::string>& tokens, TimePoint deadline) {
  if (tokens.empty()) return Unit{};
  Argv lists;
  for (const std::string& t : tokens) lists.push_back(list_key(key, t));
  if (redis.node_count() == 1) {
    auto r = eval(redis, scripts::stop_withdraw, lists, {id}, deadline);
    if (!r) return r.failure();
    return Unit{};
  }
  // Redlock: every node at once; a node that is away keeps the request until it expires.
  for (auto& r : eval_on_all(redis, scripts::stop_withdraw, lists, {id}, deadline,
                             quorum_then_the_rest(redis.node_count())))
    if (!r) log(Level::debug, {"stop_request", key, "not withdrawn: " + r.failure().message});
  return Unit{};
}

// Shared by the listener and its thread, which may outlive it (~StopListener).
struct StopListener::State {
  Connect connect;
  std::string key, token, list;
  Millis delay;
  Fd wake_read, wake_write;  // the request came
  Fd end_read, end_write;    // the listener is to end
  std::mutex mutex;          // request
  std::optional<StopRequest> request;

  void run();
  // Waits on Redis for requests until the listener is ended: the first taken is handed to the
  // run, and every later one answered with it.
  void listen(Redis& redis);
  // Redlock: the same, looking on every node at once every k_listen_look.
  void look_on_all(Redis& redis);
  // Acts on GOT, a request found on SERVER: the run's, unless TAKEN is already.
  void heard(Redis& server, const StopRequest& got, std::optional<StopRequest>& taken);
  // Answers REQUEST on SERVER with ANSWER, unless its asker gave up on it: whether it was.
  bool answer_on(Redis& server, const StopRequest& request, std::string_view answer);
  // Whether the listener was ended while waiting up to FOR_HOW_LONG.
  bool ended_within(Millis for_how_long);
};

StopListener::StopListener(Connect connect, std::string key, std::string token, Millis delay)
    : state_(std::make_shared<State>()) {
  State& s = *state_;
  s.connect = std::move(connect);
  s.key = std::move(key);
  s.list = list_key(s.key, token);
  s.token = std::move(token);
  s.delay = delay;
  int p[2];
  if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
    throw system_call_error("cannot listen for stop requests", "pipe2");
  s.wake_read.reset(p[0]);
  s.wake_write.reset(p[1]);
  if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
    throw system_call_error("cannot listen for stop requests", "pipe2");
  s.end_read.reset(p[0]);
  s.end_write.reset(p[1]);
}

StopListener::~StopListener() {
  if (!thread_.running()) return;
  char c = 1;
  (void)!::write(state_->end_write.get(), &c, 1);
  // Held up on a server that does not answer: it ends by itself, with the state it shares.
  thread_.join_by(Clock::now() + k_join_patience);
}

void StopListener::start() {
  thread_.start([state = state_] { state->run(); });
}

int StopListener::wake_fd() const { return state_->wake_read.get(); }

std::optional<StopRequest> StopListener::take() {
  char buf[16];
  while (::read(state_->wake_read.get(), buf, sizeof buf) > 0) {}
  std::lock_guard<std::mutex> guard(state_->mutex);
  return std::exchange(state_->request, std::nullopt);
}

bool StopListener::State::ended_within(Millis for_how_long) {
  pollfd fd{end_read.get(), POLLIN, 0};
  int n;
  do n = ::poll(&fd, 1, static_cast<int>(for_how_long.count()));
  while (n < 0 && errno == EINTR);
  return n > 0;
}

void StopListener::State::run() {
  if (ended_within(delay)) return;
  // Nothing of the listener may end the run: what it cannot do (a connection, TLS, memory)
  // costs only rlock stop its reach.
  try {
    std::unique_ptr<Redis> redis = connect();
    if (!ended_within(Millis(0))) listen(*redis);
  } catch (const std::exception& e) {
    log(Level::warning, {"stop_listener", key,
                         std::string("cannot listen for stop requests (") + e.what() +
                             "); rlock stop will not reach this run"});
  }
}

void StopListener::State::listen(Redis& redis) {
  if (redis.node_count() > 1) return look_on_all(redis);
  Millis retry = k_listen_retry_first;
  std::optional<StopRequest> taken;  // the request acted on
  // Behind Sentinel, a second: the asker writes to the primary the sentinels name now.
  auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
      std::min(k_listen_slice, redis.blocking_slice().value_or(k_listen_slice)));
  auto slice = std::max<Millis>(seconds, std::chrono::seconds(1));
  for (;;) {
    auto reply =
        redis.blocking_call({"BLPOP", list, std::to_string(slice.count() / 1000)},
                            Clock::now() + slice + redis.command_timeout(), end_read.get());
    if (!reply) {
      if (reply.failure().kind == Failure::Kind::interrupted) return;
      log(Level::debug,
          {"stop_listener", key, "listening for stop requests: " + reply.failure().message});
      if (ended_within(retry)) return;
      retry = std::min(retry * 2, k_listen_retry_most);
      continue;
    }
    retry = k_listen_retry_first;
    if (!reply->is_array() || reply->elements.size() != 2) continue;  // the slice ended
    auto got = decode_stop_request(reply->elements[1].str);
    if (!got) {
      log(Level::warning, {"stop_request", key, "ignored a stop request it cannot read"});
      continue;
    }
    heard(redis, *got, taken);
  }
}

void StopListener::State::look_on_all(Redis& redis) {
  // Looked at, not popped: a node slower than the look keeps its requests for the next one,
  // rather than popping one into a reply that is thrown away. Each request is acted on once,
  // whatever nodes hold it (the asker writes it to each), then taken off them all.
  std::optional<StopRequest> taken;
  std::set<std::string> handled;
  while (!ended_within(k_listen_look)) {
    auto looked = redis.broadcast({{"LRANGE", list, "0", k_requests_read_most}},
                                  Clock::now() + k_listen_look);
    std::vector<Argv> done;
    for (size_t i = 0; i < looked.size(); ++i) {
      if (!looked[i] || !looked[i]->front().is_array()) continue;
      for (const Reply& raw : looked[i]->front().elements) {
        done.push_back({"LREM", list, "0", raw.str});
        // One request, written to each node with that node's at=, is known by its asker's id
        // (an rlock older than the id: by its text).
        auto got = decode_stop_request(raw.str);
        if (!handled.insert(got && !got->id.empty() ? got->id : raw.str).second) continue;
        if (got)
          heard(redis.node(i), *got, taken);
        else
          log(Level::warning, {"stop_request", key, "ignored a stop request it cannot read"});
      }
    }
    if (!done.empty()) (void)redis.broadcast(done, Clock::now() + k_listen_look);
  }
}

void StopListener::State::heard(Redis& server, const StopRequest& got,
                                std::optional<StopRequest>& taken) {
  // The same request again: its asker sent it again, not knowing it arrived (a failover).
  if (taken && !got.id.empty() && got.id == taken->id) return;
  if (taken) {
    // The run ends at the word of the first; a later asker is told whose that was.
    (void)answer_on(server, got, std::string(k_answer_stopping) + encode_stop_request(*taken));
    return;
  }
  if (!answer_on(server, got, k_answer_taken)) return;
  taken = got;
  {
    std::lock_guard<std::mutex> guard(mutex);
    request = got;
  }
  char c = 1;
  (void)!::write(wake_write.get(), &c, 1);
}

bool StopListener::State::answer_on(Redis& server, const StopRequest& got,
                                    std::string_view answer) {
  // Sent again while it fails in a way that may pass (a failover), as long as an asker waits:
  // the asker takes the first answer, and stop_answer.lua refuses once it has given up.
  auto taken = resend_until(Clock::now() + k_answer_resend_within, [&] {
    return eval(server, scripts::stop_answer, {answer_key(key, token, got.id)},
                {std::to_string(got.until_ms), std::string(answer)},
                Clock::now() + server.command_timeout());
  });
  if (taken && taken->integer == 1) return true;
  // Given up on (this rlock was frozen, or cut off, past the asker's wait), or unanswerable:
  // the asker has said the holder did not answer, and named release --force.
  log(Level::warning, {"stop_request", key,
                       "ignored a stop request by " + got.by + " made at " + got.at + ": " +
                           (taken ? std::string("its asker gave up waiting for this run's answer")
                                  : "could not answer it (" + taken.failure().message + ")")});
  return false;
}

}  // namespace rlock
