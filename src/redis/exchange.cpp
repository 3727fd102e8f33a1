// exchange() (exchange.h): one poll() over every node's connection, until enough have replied
// or the deadline passed.
#include "redis/exchange.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <optional>

#include "redis/connection.h"

namespace rlock {

std::vector<Result<std::vector<Reply>>> exchange(const std::vector<NodeRedis*>& nodes,
                                                 const std::vector<std::vector<Argv>>& commands,
                                                 TimePoint deadline, const Enough& enough) {
  std::vector<Result<std::vector<Reply>>> out(nodes.size(), std::vector<Reply>{});
  std::vector<Connection*> waiting(nodes.size(), nullptr);  // replies still to come
  size_t sent = 0, yes = 0, other = 0;  // other: replies YES refused, and failures
  auto finish = [&](size_t i, Result<std::vector<Reply>> result) {
    if (!result) {
      nodes[i]->drop();
      ++other;
    } else if (!enough.yes || std::any_of(result->begin(), result->end(), enough.yes)) {
      ++yes;
    } else {
      ++other;
    }
    out[i] = std::move(result);
    waiting[i] = nullptr;
  };
  auto heard_enough = [&] {
    if (yes >= enough.needed) return true;
    // The verdict is no: too few were asked, or too many said otherwise.
    return enough.yes && (enough.needed > sent || other > sent - enough.needed);
  };
  auto advance = [&](size_t i, short revents) {
    auto moved = waiting[i]->advance(revents);
    if (!moved)
      finish(i, moved.failure());
    else if (waiting[i]->replies() >= commands[i].size())
      finish(i, waiting[i]->take(commands[i].size()));
  };
  // Every connect starts before any is waited for.
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (commands[i].empty()) continue;
    ++sent;
    auto conn = nodes[i]->connection();
    if (!conn) {
      out[i] = conn.failure();
      ++other;
      continue;
    }
    waiting[i] = *conn;
    waiting[i]->queue(commands[i]);
  }
  for (size_t i = 0; i < nodes.size(); ++i)
    if (waiting[i]) advance(i, 0);
  std::vector<pollfd> polled;
  std::vector<size_t> which;
  auto settled = [&] {  // nothing left to do for the rest (Enough::Rest)
    return std::none_of(waiting.begin(), waiting.end(), [&](Connection* c) {
      return c && (enough.rest == Enough::Rest::answered ||
                   (enough.rest == Enough::Rest::sent && c->unsent()));
    });
  };
  std::optional<TimePoint> settle;  // once enough was heard: until when the rest are driven
  for (;;) {
    if (!settle && heard_enough()) {
      // A refused acquire is left at once: what it did not send stays queued before its undo.
      if (enough.rest == Enough::Rest::sent && yes < enough.needed) break;
      // Half of what is left at most: a NOSCRIPT round, a release asked again, may follow.
      TimePoint now = Clock::now();
      settle = now + std::min<Clock::duration>(enough.grace,
                                               std::max<Clock::duration>((deadline - now) / 2, {}));
    }
    if (settle && (settled() || Clock::now() >= *settle)) break;
    polled.clear();
    which.clear();
    TimePoint until = settle.value_or(deadline);
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (!waiting[i]) continue;
      polled.push_back({waiting[i]->socket(), waiting[i]->events(), 0});
      which.push_back(i);
      until = std::min(until, waiting[i]->wake_at(deadline));
    }
    if (polled.empty()) break;
    int n = ::poll(polled.data(), polled.size(), millis_until(until));
    if (n < 0 && errno != EINTR) {
      Failure failure{Failure::Kind::io, errno_message("poll")};
      for (size_t i : which) finish(i, failure);
      break;
    }
    TimePoint now = Clock::now();
    for (size_t k = 0; k < which.size(); ++k) {
      size_t i = which[k];
      if (n > 0 && polled[k].revents)
        advance(i, polled[k].revents);
      else if (now >= waiting[i]->wake_at(deadline) && now < waiting[i]->deadline(deadline))
        advance(i, 0);  // a handshake's own bound (Connection::wake_at)
      if (waiting[i] && now >= waiting[i]->deadline(deadline)) {
        Failure failure = waiting[i]->timed_out();
        waiting[i]->kill();
        finish(i, failure);
      }
    }
  }
  for (size_t i = 0; i < nodes.size(); ++i)
    if (waiting[i]) out[i] = waiting[i]->abandon();
  return out;
}

}  // namespace rlock
