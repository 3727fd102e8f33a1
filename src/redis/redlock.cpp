// Redlock: several independent Redis masters (--redis given more than once), asked the same
// thing at once. The quorum rules live with the lock protocol (lock_quorum.cpp); here is only
// the fan-out: one round trip to all nodes, each node's answer kept apart, done as soon as the
// caller has heard enough (exchange()).
#include "redis/redlock.h"

#include "redis/exchange.h"
#include "redis/redis_node.h"

namespace rlock {

namespace {

class RedlockRedis final : public Redis {
public:
  RedlockRedis(const std::vector<RedisUrl>& urls, const ConnectOptions& options) {
    for (const RedisUrl& url : urls) nodes_.push_back(std::make_unique<NodeRedis>(url, options));
    answered_.assign(nodes_.size(), true);
  }

  // For callers that are not quorum-aware: the first node that answers, asked one after the
  // other; those that answered the last broadcast first, so that the run's history, written
  // after the release, does not wait on a node that the release found down.
  Result<std::vector<Reply>> pipeline(const std::vector<Argv>& commands,
                                      TimePoint deadline) override {
    Failure last{Failure::Kind::connect, name() + ": no node answered"};
    for (bool answered : {true, false})
      for (size_t i = 0; i < nodes_.size(); ++i) {
        if (answered_[i] != answered) continue;
        auto replies = nodes_[i]->pipeline(commands, deadline);
        if (replies) return replies;
        last = replies.failure();
      }
    return last;
  }

  Result<Reply> blocking_call(const Argv&, TimePoint, int) override {
    // Waiters poll under Redlock (wait.cpp): a wake-up list lives on one node only.
    return Failure{Failure::Kind::protocol, "blocking commands are not used with Redlock"};
  }

  std::string name() const override {
    std::string out;
    for (const auto& n : nodes_) out += (out.empty() ? "" : ",") + n->name();
    return out;
  }
  Millis command_timeout() const override { return nodes_.front()->command_timeout(); }

  size_t node_count() const override { return nodes_.size(); }
  Redis& node(size_t i) override { return *nodes_[i]; }

  std::vector<Result<std::vector<Reply>>> broadcast(const std::vector<Argv>& commands,
                                                    TimePoint deadline, const std::vector<bool>& to,
                                                    const Enough& enough) override {
    std::vector<NodeRedis*> nodes;
    std::vector<std::vector<Argv>> batches;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      nodes.push_back(nodes_[i].get());
      batches.push_back(to.empty() || to[i] ? commands : std::vector<Argv>{});
    }
    auto replies = exchange(nodes, batches, deadline, enough);
    for (size_t i = 0; i < nodes_.size(); ++i)
      if (!batches[i].empty()) answered_[i] = replies[i].ok();
    return replies;
  }

  Result<Unit> for_each_primary(const std::function<Result<Unit>(Redis&)>& f, TimePoint) override {
    // Each node holds its own copy of every lock; a node that is down is left out, as the
    // quorum would leave it out.
    std::optional<Failure> last;
    size_t answered = 0;
    for (auto& n : nodes_) {
      auto done = f(*n);
      if (done)
        ++answered;
      else
        last = done.failure();
    }
    if (answered == 0 && last) return *last;
    return Unit{};
  }

private:
  std::vector<std::unique_ptr<NodeRedis>> nodes_;
  std::vector<bool> answered_;  // whether each node replied to the last broadcast it was sent
};

}  // namespace

std::unique_ptr<Redis> make_redlock_redis(const std::vector<RedisUrl>& urls,
                                          const ConnectOptions& options) {
  return std::make_unique<RedlockRedis>(urls, options);
}

}  // namespace rlock
