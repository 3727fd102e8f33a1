#include "lock/stop_request.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "lock/lock.h"
#include "lock/scripts.h"
#include "util/log.h"
#include "util/resources.h"

namespace rlock {

namespace {

// How long one BLPOP of the listener blocks on the server before it is sent again. A request
// arrives at once whatever this is; it bounds only how long a listener stays with a server
// that stopped answering without closing its connection (a frozen Cluster master replaced by
// its replica), and the cost is one command a minute.
constexpr Millis k_listen_slice{60000};
// After a failure, how soon the listener connects again, doubling up to the most.
constexpr Millis k_listen_retry_first{250};
constexpr Millis k_listen_retry_most{5000};

std::string list_key(const std::string& key, const std::string& token) {
  return helper_key(key, "stop-") + token;
}

std::string answer_key(const std::string& key, const std::string& token) {
  return helper_key(key, "stopping-") + token;
}

Result<StopAsk> decode_ask(const Reply& reply) {
  if (!reply.is_array() || reply.elements.empty()) return unexpected_reply("the stop script");
  const auto& e = reply.elements;
  StopAsk out;
  out.kind = e[0].str;
  if (out.kind == "broken" && e.size() >= 2) out.value = e[1].str;
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
    }
    text = space == std::string_view::npos ? std::string_view{} : text.substr(space + 1);
  }
  if (r.by.empty() || r.signal < 0 || r.signal >= 65) return std::nullopt;
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
            std::to_string(std::max<int64_t>(1, answer_within.count())),
            helper_key(key, "stopping-")};
  if (redis.node_count() == 1) {
    auto reply = eval(redis, scripts::stop, keys, args, deadline);
    if (!reply) return reply.failure();
    return decode_ask(*reply);
  }
  // Redlock: each node holds its own copy of the lock; the holder listens on one of them.
  // The answer is that of the nodes that have the holder, the first that replied otherwise.
  auto replies = eval_on_all(redis, scripts::stop, keys, args, deadline, {});
  std::optional<StopAsk> best;
  std::optional<Failure> failure;
  for (auto& reply : replies) {
    if (!reply) {
      failure = reply.failure();
      continue;
    }
    auto ask = decode_ask(*reply);
    if (!ask) return ask.failure();
    if (!best || (best->asked.empty() && !ask->asked.empty())) best = *ask;
  }
  if (!best) return *failure;
  return *best;
}

Result<std::vector<std::string>> await_stop_answers(Redis& redis, const std::string& key,
                                                    std::vector<std::string> tokens,
                                                    TimePoint until) {
  std::vector<std::string> answered;
  while (!tokens.empty()) {
    TimePoint now = Clock::now();
    if (now >= until) break;
    Argv pop{"BLPOP"};
    for (const std::string& t : tokens) pop.push_back(answer_key(key, t));
    Millis left = std::chrono::ceil<Millis>(until - now);
    std::optional<Reply> reply;
    if (redis.node_count() == 1) {
      pop.push_back(std::to_string(left.count() / 1000.0));
      auto r = redis.blocking_call(pop, until + redis.command_timeout(), -1);
      if (!r) return r.failure();
      reply = *r;
    } else {
      // Redlock: no blocking command (a node's list is its own); each node is looked at in turn,
      // and the answer is on the node the holder listens on.
      for (size_t i = 0; i < redis.node_count() && !(reply && reply->is_array()); ++i)
        for (const std::string& t : tokens)
          if (auto r = redis.node(i).call({"LPOP", answer_key(key, t)}, now + left);
              r && r->is_string()) {
            reply = Reply{};
            reply->type = Reply::Type::array;
            reply->elements = {Reply{}, *r};
            reply->elements[0].str = answer_key(key, t);
            break;
          }
      if (!reply) std::this_thread::sleep_for(std::min(left, Millis(50)));
    }
    if (!reply || !reply->is_array() || reply->elements.size() != 2) continue;
    std::string list = reply->elements[0].str;
    auto it = std::find_if(tokens.begin(), tokens.end(),
                           [&](const std::string& t) { return answer_key(key, t) == list; });
    if (it == tokens.end()) continue;
    answered.push_back(*it);
    tokens.erase(it);
  }
  return answered;
}

StopListener::StopListener(Connect connect, std::string key, std::string token, Millis delay)
    : connect_(std::move(connect)), key_(std::move(key)), list_(list_key(key_, token)),
      answer_(answer_key(key_, token)), delay_(delay) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
    throw system_call_error("cannot listen for stop requests", "pipe2");
  wake_read_.reset(p[0]);
  wake_write_.reset(p[1]);
  if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
    throw system_call_error("cannot listen for stop requests", "pipe2");
  end_read_.reset(p[0]);
  end_write_.reset(p[1]);
}

StopListener::~StopListener() {
  if (!thread_.joinable()) return;
  char c = 1;
  (void)!::write(end_write_.get(), &c, 1);
  thread_.join();
}

void StopListener::start() {
  thread_ = std::thread([this] { run(); });
}

std::optional<StopRequest> StopListener::take() {
  char buf[16];
  while (::read(wake_read_.get(), buf, sizeof buf) > 0) {}
  std::lock_guard<std::mutex> guard(mutex_);
  return std::exchange(request_, std::nullopt);
}

bool StopListener::ended_within(Millis for_how_long) {
  pollfd fd{end_read_.get(), POLLIN, 0};
  int n;
  do n = ::poll(&fd, 1, static_cast<int>(for_how_long.count()));
  while (n < 0 && errno == EINTR);
  return n > 0;
}

void StopListener::run() {
  if (ended_within(delay_)) return;
  std::unique_ptr<Redis> redis;
  try {
    redis = connect_();
  } catch (const std::exception& e) {
    log(Level::warning, {"stop_listener", key_,
                         std::string("cannot listen for stop requests (") + e.what() +
                             "); rlock stop will not reach this run"});
    return;
  }
  listen(*redis);
}

void StopListener::listen(Redis& redis) {
  size_t node = 0;  // Redlock: the node listened on, the next after a failure
  Millis retry = k_listen_retry_first;
  for (;;) {
    Redis& server = redis.node(node % redis.node_count());
    auto reply = server.blocking_call(
        {"BLPOP", list_, std::to_string(k_listen_slice.count() / 1000)},
        Clock::now() + k_listen_slice + server.command_timeout(), end_read_.get());
    if (!reply) {
      if (reply.failure().kind == Failure::Kind::interrupted) return;
      log(Level::debug,
          {"stop_listener", key_, "listening for stop requests: " + reply.failure().message});
      ++node;
      if (ended_within(retry)) return;
      retry = std::min(retry * 2, k_listen_retry_most);
      continue;
    }
    retry = k_listen_retry_first;
    if (!reply->is_array() || reply->elements.size() != 2) continue;  // the slice ended
    auto request = decode_stop_request(reply->elements[1].str);
    if (!request) {
      log(Level::warning, {"stop_request", key_, "ignored a stop request it cannot read"});
      continue;
    }
    if (!answer(server, *request)) continue;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      request_ = std::move(request);
    }
    char c = 1;
    (void)!::write(wake_write_.get(), &c, 1);
    return;  // the run ends now; one request is enough
  }
}

bool StopListener::answer(Redis& server, const StopRequest& request) {
  auto taken =
      eval(server, scripts::stop_answer, {answer_}, {std::to_string(request.until_ms), "taken"},
           Clock::now() + server.command_timeout());
  if (taken && taken->integer == 1) return true;
  // Given up on (this rlock was frozen, or cut off, past the asker's wait), or unanswerable:
  // the asker has said the holder did not answer, and named release --force.
  log(Level::warning, {"stop_request", key_,
                       "ignored a stop request by " + request.by + " made at " + request.at + ": " +
                           (taken ? std::string("its asker gave up waiting for this run's answer")
                                  : "could not answer it (" + taken.failure().message + ")")});
  return false;
}

}  // namespace rlock
