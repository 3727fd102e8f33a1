// rlock watch KEY...: one line (or JSON object) per change of the locks, until interrupted.
// It learns of changes from keyspace notifications when the server sends them for what a lock
// is made of (notify-keyspace-events, read and never changed), else by polling; either way it
// reads the locks again (read_locks: one round trip) and tells what changed (lock_watch.h).
// It writes nothing to Redis.
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <set>

#include "lock/lock.h"
#include "lock/lock_watch.h"
#include "print/print.h"
#include "process/signals.h"
#include "redis/connection.h"
#include "run/wait.h"
#include "util/log.h"
#include "verbs/command.h"
#include "verbs/verbs.h"

namespace rlock {

namespace {

// A stream entry's ID ("1700000000000-3": the server's ms, a sequence number) as numbers.
std::pair<uint64_t, uint64_t> stream_id(const std::string& id) {
  char* end = nullptr;
  uint64_t ms = std::strtoull(id.c_str(), &end, 10);
  uint64_t seq = *end == '-' ? std::strtoull(end + 1, nullptr, 10) : 0;
  return {ms, seq};
}

// The smallest ID after ID: XRANGE's start is inclusive ("(" for exclusive needs Redis 6.2).
std::string stream_id_after(const std::string& id) {
  auto [ms, seq] = stream_id(id);
  if (seq == UINT64_MAX) return std::to_string(ms + 1) + "-0";
  return std::to_string(ms) + "-" + std::to_string(seq + 1);
}

// How many history entries one XRANGE brings: a page (the history keeps 100 by default).
constexpr int k_history_page = 100;

// A channel of a subscription: which watched lock it is about, and whether it is the lock's
// key itself (whose events tell a release from an expiry) or one of its helper keys.
struct Channel {
  size_t lock;
  bool lock_key;
};

// The subscription on one server: a connection of its own, and the channels of the keys
// that server holds (all of them but on a Cluster).
struct Subscription {
  std::string server;
  std::unique_ptr<Connection> connection;
  std::map<std::string, Channel> channels;
};

class Watcher {
public:
  Watcher(Redis& redis, std::vector<std::string> keys, bool json, SignalEvents& signals)
      : redis_(redis), keys_(std::move(keys)), style_(output_style(json)), signals_(signals),
        watches_(keys_.size()), hints_(keys_.size()), history_seen_(keys_.size()) {}

  int run() {
    // A first read finds out whether Redis answers (and teaches a Cluster client its slots,
    // which say where to subscribe).
    auto first = read_locks(redis_, keys_);
    if (!first) return unavailable(first.failure());
    auto mode = listen();
    if (!mode) return unavailable(mode.failure());
    mode_ = *mode;
    print_watch_start(keys_, mode_, style_);
    // Read again: a change between the first read and the subscription is in this one.
    if (auto read = read_and_tell(); !read) {
      if (auto end = ride_out(read.failure())) return *end;
    }
    for (;;) {
      if (auto end = wait_for_news()) return *end;
    }
  }

private:
  // Sets up keyspace notifications on the server of each key, or says why it polls instead.
  // A failure: the server did not answer.
  Result<WatchMode> listen() {
    subscriptions_.clear();
    if (redis_.node_count() > 1)
      return polling("Redlock: each of its " + std::to_string(redis_.node_count()) +
                     " servers would tell of its own copy only");
    TimePoint deadline = Clock::now() + redis_.command_timeout();
    std::string config_value;
    for (size_t i = 0; i < keys_.size(); ++i) {
      auto own = redis_.own_connection(keys_[i], deadline);
      if (!own) return own.failure();
      auto sub = std::find_if(subscriptions_.begin(), subscriptions_.end(),
                              [&](const Subscription& s) { return s.server == own->name; });
      if (sub == subscriptions_.end()) {
        auto config =
            own->connection->pipeline({{"CONFIG", "GET", "notify-keyspace-events"}}, deadline);
        if (!config) return config.failure();
        const Reply& r = config->front();
        // An ACL without +config, or CONFIG renamed (rename-command), as managed Redis does.
        if (r.type == Reply::Type::error)
          return polling(r.str.find("unknown command") != std::string::npos
                             ? "CONFIG is renamed or disabled on this server"
                             : "CONFIG GET is not allowed: " + r.str.substr(0, r.str.find(' ')));
        if (!r.is_array() || r.elements.size() < 2)
          return polling("CONFIG GET does not show notify-keyspace-events");
        config_value = r.elements[1].str;
        if (config_value.empty()) return polling("keyspace notifications are off on this server");
        if (std::string missing = missing_classes(config_value); !missing.empty())
          return polling("notify-keyspace-events \"" + config_value + "\" lacks " + missing);
        subscriptions_.push_back({own->name, std::move(own->connection), {}});
        sub = subscriptions_.end() - 1;
      }
      std::string prefix = "__keyspace@" + std::to_string(own->db) + "__:";
      sub->channels[prefix + keys_[i]] = {i, true};
      // The queue (waiters), a semaphore's and a shared lock's places. The waiters' liveness
      // zset changes at each --fair waiter's look (twice a second): the queue's own expiry,
      // renewed at the same time, is event enough.
      for (const char* helper : {"queue", "sem", "shared", "pause"})
        sub->channels[prefix + helper_key(keys_[i], helper)] = {i, false};
    }
    for (Subscription& sub : subscriptions_) {
      std::vector<std::string> channels;
      for (const auto& [channel, _] : sub.channels) channels.push_back(channel);
      auto subscribed = sub.connection->subscribe(channels, deadline);
      if (!subscribed && subscribed.failure().kind == Failure::Kind::server)
        return polling("SUBSCRIBE is not allowed: " + subscribed.failure().code);
      if (!subscribed) return subscribed.failure();
    }
    return WatchMode{true, config_value, "", k_watch_reread_interval};
  }

  WatchMode polling(std::string reason) {
    subscriptions_.clear();
    return WatchMode{false, "", std::move(reason), k_watch_poll_interval};
  }

  // Warns of each helper key of another type the first time a read finds it, as status does
  // (docs/DESIGN.md, "Reads with a bound"): a poll four times a second does not repeat it.
  void warn_once(const std::vector<LockState>& locks) {
    for (const LockState& s : locks)
      for (const std::string& message : s.wrong_types)
        if (warned_.insert(message).second) log_warning(message);
  }

  // Reads every lock and prints what changed since the last read.
  Result<Unit> read_and_tell() {
    // A connection left idle may be closed by a proxy just as the read goes out: the close
    // comes after the command, too late for NodeRedis::connection() to see it. A read is safe
    // to repeat: once more at once, on a new connection.
    bool idle = Clock::now() - last_read_ >= k_idle_check_after;
    auto locks = read_locks(redis_, keys_);
    if (!locks && idle && locks.failure().kind == Failure::Kind::io)
      locks = read_locks(redis_, keys_);
    last_read_ = Clock::now();
    if (!locks) return locks.failure();
    warn_once(*locks);
    TimePoint at = Clock::now();
    auto runs = read_new_runs(*locks);
    if (!runs) return runs.failure();
    for (size_t i = 0; i < keys_.size(); ++i) {
      for (const WatchEvent& e : watches_[i].look((*locks)[i], at, hints_[i], (*runs)[i]))
        print_watch_event(e, style_);
      hints_[i].clear();
    }
    next_read_ = at + mode_.interval;
    return Unit{};
  }

  // The entries of each key's history added since the last look, oldest first: every run that
  // came and went between two looks, not only the newest, and an operator's actions. Read up to
  // the newest entry LOCKS saw, which came in the same round trip as the locks' state, so that
  // the two agree; a second round trip only when there is a new entry. At the first look, what
  // the history holds already is no news.
  Result<std::vector<std::vector<RunRecord>>> read_new_runs(const std::vector<LockState>& locks) {
    std::vector<std::vector<RunRecord>> out(keys_.size());
    // Redlock: each run is recorded on one node, each node's history its own stream, with no
    // one place to read them from in order: the newest run the look read is the one known.
    if (redis_.node_count() > 1) return out;
    TimePoint deadline = Clock::now() + redis_.command_timeout();
    for (size_t i = 0; i < keys_.size(); ++i)
      if (!history_seen_[i])
        history_seen_[i] = locks[i].newest_entry.empty() ? "0-0" : locks[i].newest_entry;
    for (;;) {
      std::vector<Argv> pages;
      std::vector<size_t> which;
      for (size_t i = 0; i < keys_.size(); ++i) {
        const std::string& newest = locks[i].newest_entry;
        if (newest.empty() || stream_id(*history_seen_[i]) >= stream_id(newest)) continue;
        pages.push_back({"XRANGE", helper_key(keys_[i], "history"),
                         stream_id_after(*history_seen_[i]), newest, "COUNT",
                         std::to_string(k_history_page)});
        which.push_back(i);
      }
      if (pages.empty()) return out;
      auto replies = redis_.pipeline(pages, deadline);
      if (!replies) return replies.failure();
      for (size_t k = 0; k < which.size(); ++k) {
        size_t i = which[k];
        const Reply& r = (*replies)[k];
        if (r.type == Reply::Type::error) return redis_.server_failure(r.str, pages[k]);
        if (!r.is_array()) return unexpected_reply("XRANGE");
        std::string before = *history_seen_[i];
        for (const Reply& e : r.elements) {
          if (!e.is_array() || e.elements.empty()) continue;
          history_seen_[i] = e.elements[0].str;
          // A run's start says nothing of how a holder went: its end, or the ttl, does.
          if (auto run = decode_history_entry(e); run && run->ended())
            out[i].push_back(std::move(*run));
        }
        // A short page is the last: the rest was trimmed meanwhile, or was never there.
        if (r.elements.size() < static_cast<size_t>(k_history_page) || *history_seen_[i] == before)
          history_seen_[i] = locks[i].newest_entry;
      }
    }
  }

  // Waits for a message, a signal, or the time of the next read, and acts on it. Returns the
  // exit status when the watch is over.
  std::optional<int> wait_for_news() {
    TimePoint wake = next_read_;
    for (const LockWatch& w : watches_)
      if (auto due = w.due()) wake = std::min(wake, *due);
    std::vector<pollfd> fds{{signals_.fd(), POLLIN, 0}};
    for (const Subscription& sub : subscriptions_)
      fds.push_back({sub.connection->socket(), POLLIN, 0});
    int n = ::poll(fds.data(), fds.size(), millis_until(wake));
    if (n < 0 && errno != EINTR) throw Error(k_exit_internal, errno_message("poll"));
    if (signals_.next_request_to_stop()) return k_exit_ok;
    bool heard = false;
    for (size_t i = 0; n > 0 && i < subscriptions_.size(); ++i) {
      if (!fds[i + 1].revents) continue;
      Subscription& sub = subscriptions_[i];
      for (;;) {
        bool idle = Clock::now() - sub.connection->last_heard() >= k_idle_check_after;
        auto message = sub.connection->next_message(Clock::now());
        if (!message && idle && message.failure().kind == Failure::Kind::io)
          return subscribe_again();
        if (!message) return ride_out(message.failure());
        if (!*message) break;
        hear(sub, **message);
        heard = true;
      }
    }
    if (!heard && Clock::now() < wake) return std::nullopt;
    if (auto read = read_and_tell(); !read) return ride_out(read.failure());
    if (subscribed_elsewhere()) return subscribe_again();
    return std::nullopt;
  }

  // Whether a key's commands go to another server than its subscription's now: the read
  // followed a failover (a Sentinel's new primary, a Cluster's promoted replica) that the
  // subscription, on the old server, may hear of late (a demoted primary resyncing) or never.
  bool subscribed_elsewhere() {
    if (subscriptions_.empty()) return false;  // polling
    for (const std::string& key : keys_) {
      std::string now = redis_.server_of(key);
      if (!now.empty() && std::none_of(subscriptions_.begin(), subscriptions_.end(),
                                       [&](const Subscription& s) { return s.server == now; }))
        return true;
    }
    return false;
  }

  // A subscription closed while it was idle: by a proxy's or a load balancer's idle timeout
  // (Redis never closes a subscriber for being idle). Subscribes again at once and reads the
  // locks again (a change meanwhile sent its message to no one), without a word, as
  // NodeRedis::connection() replaces a connection closed while idle. Only if that fails is
  // Redis unreachable.
  std::optional<int> subscribe_again() {
    auto mode = listen();
    if (!mode) return ride_out(mode.failure());
    if (mode->notifications != mode_.notifications || mode->reason != mode_.reason) {
      mode_ = *mode;
      print_watch_start(keys_, mode_, style_);
    }
    if (auto read = read_and_tell(); !read) return ride_out(read.failure());
    return std::nullopt;
  }

  // A keyspace message: ["message", "__keyspace@0__:KEY", "del"].
  void hear(const Subscription& sub, const Reply& message) {
    auto channel = sub.channels.find(message.elements[1].str);
    if (channel != sub.channels.end() && channel->second.lock_key)
      hints_[channel->second.lock].push_back(message.elements[2].str);
  }

  // Redis stopped answering (FAILURE): one line, then tries again with backoff until it
  // answers, and goes on with what changed meanwhile. Returns the exit status when the watch
  // is over: a signal, or a refusal that trying again will not change.
  std::optional<int> ride_out(const Failure& failure) {
    if (!worth_retrying(failure)) return unavailable(failure);
    print_watch_unreachable(failure.message, style_);
    subscriptions_.clear();
    TimePoint since = Clock::now();
    Backoff backoff;
    for (;;) {
      pollfd p{signals_.fd(), POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(backoff.next().count()));
      if (signals_.next_request_to_stop()) return k_exit_ok;
      auto mode = listen();
      if (!mode) {
        if (!worth_retrying(mode.failure())) return unavailable(mode.failure());
        continue;
      }
      // Hints heard before the outage say nothing of what happened during it.
      for (auto& hints : hints_) hints.clear();
      bool changed = mode->notifications != mode_.notifications || mode->reason != mode_.reason;
      mode_ = *mode;
      auto locks = read_locks(redis_, keys_);
      if (!locks) {
        if (!worth_retrying(locks.failure())) return unavailable(locks.failure());
        continue;
      }
      warn_once(*locks);
      TimePoint at = Clock::now();
      auto runs = read_new_runs(*locks);
      if (!runs) {
        if (!worth_retrying(runs.failure())) return unavailable(runs.failure());
        continue;
      }
      print_watch_reachable(std::chrono::duration_cast<Millis>(Clock::now() - since), style_);
      if (changed) print_watch_start(keys_, mode_, style_);
      for (size_t i = 0; i < keys_.size(); ++i)
        for (const WatchEvent& e : watches_[i].look((*locks)[i], at, {k_outage_hint}, (*runs)[i]))
          print_watch_event(e, style_);
      next_read_ = at + mode_.interval;
      return std::nullopt;
    }
  }

  Redis& redis_;
  const std::vector<std::string> keys_;
  const OutputStyle style_;
  SignalEvents& signals_;
  WatchMode mode_;
  std::vector<Subscription> subscriptions_;      // none when polling
  std::vector<LockWatch> watches_;               // one per key
  std::set<std::string> warned_;                 // the wrong types told (warn_once)
  std::vector<std::vector<std::string>> hints_;  // per key: its events since the last read
  // Per key: the ID of the last history entry read (or there at the first look).
  std::vector<std::optional<std::string>> history_seen_;
  TimePoint next_read_{};
  TimePoint last_read_{};  // when read_and_tell() last used the connection
};

}  // namespace

int watch_verb(const GlobalOptions& global, const std::vector<std::string>& keys, bool json) {
  // Before any connection: INT and TERM become events to read, not a death mid-line.
  SignalEvents signals;
  auto redis = connect_redis(global);
  try {
    return Watcher(*redis, keys, json, signals).run();
  } catch (const StdoutClosed&) {
    return k_exit_ok;  // `rlock watch k | grep -m1 expired`: its reader has what it wanted
  }
}

namespace {

struct WatchArgs : Arguments {
  std::vector<std::string> keys;
  bool json = false;

  // A key watched twice would print each of its changes twice.
  void check(const std::vector<std::string>&) const override {
    for (size_t i = 0; i < keys.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (keys[i] == keys[j]) throw usage_error("KEY '" + keys[i] + "' is given twice");
  }

  int run(const Invocation& in) override {
    return watch_verb(in.resolved.global, in.keys(keys), json);
  }
};

constexpr Option k_options[] = {
    option<&WatchArgs::keys>("KEY", k_keys_help).must(),
    option<&WatchArgs::json>("--json", "print one JSON object a line (fields in rlock-watch(1))")};

}  // namespace

constexpr Command k_watch_command = {
    "watch",
    "one line per change of the locks, until interrupted",
    "KEY...",
    {k_options, k_output, k_connection},
    "Tells each change of the locks as it happens: taken (by whom), renewed late,\n"
    "released, expired, broken, waiters queued, places of a semaphore or shared lock.\n"
    "Keyspace notifications when the server sends them (notify-keyspace-events\n"
    "with K and g$xz, or KA; never changed by rlock), else polling every 250ms: the\n"
    "first line says which. Writes nothing to Redis. Ctrl-C or SIGTERM ends it.\n"
    "Examples:\n"
    "  rlock watch lock:daily-report lock:sync\n"
    "Exit status: 0 ended by a signal or by its reader going away (| head -1); 69 Redis "
    "unreachable at the start, or it refused us; 64 usage, 78 configuration, 125 rlock "
    "failed.",
    make_arguments<WatchArgs>};

}  // namespace rlock
