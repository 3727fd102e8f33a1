// Redlock (docs/DESIGN.md "Topologies", redlock.h): the mutex's scripts on every independent node
// at once, believed by quorum. Waiters poll (wait.cpp), so nobody queues on a node, and a release
// goes to every node whatever the quorum said: one whose reply was lost may hold it too. Every
// operation goes on as soon as the quorum's verdict is known: a quorum said yes, or so many said no
// that none can. A node that is down or black-holed costs no time while a quorum answers (an
// acquire and a release: at most k_send_grace), and one that has not answered by then is
// counted as failed for that operation (exchange(), exchange.h). The acquire, its undo and the
// release still go to it (Enough::Rest): its late take is then given back.
#include <algorithm>

#include "lock/lease.h"
#include "lock/lock_kinds.h"
#include "lock/scripts.h"
#include "redis/redlock.h"
#include "redis/retry.h"

namespace rlock {

namespace {

// A reply of the scripts that answer 1 for yes (renew, and GET's answer made one by holds()).
bool integer_yes(const Reply& r) { return r.is_integer() && r.integer == 1; }

// The acquire script's yes: {1, fence}.
bool acquired_yes(const Reply& r) {
  return r.is_array() && !r.elements.empty() && integer_yes(r.elements[0]);
}

// A quorum of REPLIES (integers, 1 = yes) says yes: true. So many said no that no quorum can
// say yes: false. Neither (nodes that did not answer): the last failure.
Result<bool> quorum_verdict(std::vector<Result<Reply>> replies, const char* what) {
  size_t yes = 0, no = 0;
  std::optional<Failure> failure;
  for (auto& r : replies) {
    if (!r)
      failure = r.failure();
    else if (integer_yes(*r))
      ++yes;
    else
      ++no;
  }
  size_t quorum = redlock_quorum(replies.size());
  if (yes >= quorum) return true;
  if (no > replies.size() - quorum) return false;
  return Failure{failure ? failure->kind : Failure::Kind::io,
                 std::string(what) + " on only " + std::to_string(yes) + " of " +
                     std::to_string(replies.size()) +
                     " Redis nodes: " + (failure ? failure->message : std::string("no quorum")),
                 failure ? failure->code : ""};
}

class QuorumLock final : public Lock {
public:
  QuorumLock(Redis& redis, std::string key, std::string token, LockMode mode)
      : Lock(redis, std::move(key), std::move(token), mode) {}

  Result<AcquireOutcome> try_acquire(const std::string& value, Millis ttl,
                                     const std::optional<WaitPlan>&, TimePoint deadline) override {
    TimePoint started = Clock::now();
    // The wait for the nodes still out comes out of the lease: a tenth of it at most.
    auto replies = eval_on_all(
        redis_, scripts::acquire,
        {key_, fence_key_, queue_key_, alive_key_, shared_key_, shared_values_key_, pause_key_},
        {value, std::to_string(ttl.count()), owner_prefix_, token_, wake_prefix_, "0", "0", "0",
         std::to_string(mode_.retention.count())},
        deadline,
        Enough{quorum(), acquired_yes, Enough::Rest::sent, std::min(k_send_grace, ttl / 10)});
    size_t acquired = 0;
    int64_t fence = 0, taken_ms = 0;  // the largest fence, and its node's clock
    std::optional<Busy> busy;
    std::optional<WrongType> wrong;
    std::optional<Failure> failure;
    for (auto& r : replies) {
      if (!r) {
        failure = r.failure();
        continue;
      }
      const auto& e = r->elements;
      if (!r->is_array() || e.size() < 2 || !e[0].is_integer()) {
        failure = unexpected_reply("the acquire script");
      } else if (e[0].integer == 1 && e[1].is_integer()) {
        ++acquired;
        if (e[1].integer > fence && e.size() > 2 && e[2].is_integer()) taken_ms = e[2].integer;
        fence = std::max(fence, e[1].integer);
      } else if ((e[0].integer == 0 || e[0].integer == 2) && e.size() >= 4 && !busy) {
        busy = Busy{e[1].str, Millis(e[2].integer), Millis(0), 0, e[0].integer == 2};
      } else if (e[0].integer == -1 && !wrong) {
        wrong = WrongType{e[1].str};
      }
    }
    size_t quorum = redlock_quorum(replies.size());
    // What is left of the lease once the nodes agreed: Redlock's validity (ttl - elapsed -
    // drift, docs/DESIGN.md "Topologies").
    Millis validity =
        ttl - std::chrono::duration_cast<Millis>(Clock::now() - started) - lease_drift(ttl);
    if (acquired >= quorum && validity > Millis(0))
      return AcquireOutcome{Acquired{fence, taken_ms, ""}};
    // No quorum (or no time left in it): give back whatever we took, on every node. Taken
    // nowhere, the nodes still out did not get the acquire sent (Enough::Rest): not waited for.
    if (acquired > 0 || failure)
      (void)release_on_all(deadline, acquired > 0 ? Enough::Rest::answered : Enough::Rest::left);
    if (wrong) return AcquireOutcome{*wrong};
    std::string counts = std::to_string(acquired) + " of " + std::to_string(replies.size()) +
                         " Redis nodes (Redlock needs " + std::to_string(quorum) + ")";
    if (acquired >= quorum)
      return Failure{Failure::Kind::timeout,
                     "took the lock on " + counts + " too slowly: no validity left in the ttl"};
    if (busy) return AcquireOutcome{*busy};  // held by someone on some node: busy, not down
    return Failure{failure ? failure->kind : Failure::Kind::io,
                   "took the lock on only " + counts + ": " +
                       (failure ? failure->message : std::string("no quorum")),
                   failure ? failure->code : ""};
  }

  // The phase rides to every node, as the renewal does: status reads one node, any of them.
  Result<bool> renew(Millis ttl, TimePoint deadline, const PhaseUpdate& phase) override {
    Argv keys{key_, fence_key_};
    Argv args{owner_prefix_, std::to_string(ttl.count()), std::to_string(mode_.retention.count())};
    add_phase(keys, args, phase);
    return quorum_verdict(
        eval_on_all(redis_, scripts::renew, keys, args, deadline, Enough{quorum(), integer_yes}),
        "renewed");
  }

  // THEN is left unsent: it belongs on one node, where the caller sends it.
  Result<bool> release(TimePoint deadline, const std::vector<ScriptCall>&,
                       std::vector<Reply>*) override {
    return release_on_all(deadline, Enough::Rest::answered);
  }

  Result<Unit> leave_queue(TimePoint) override { return Unit{}; }  // Redlock waiters never queue

  // Not done at the first sign that a quorum cannot say yes: a node that is down is not one
  // that says no, and "not held" must come from a quorum's noes (rlock stop takes it for the
  // lock given back).
  Result<bool> holds(TimePoint deadline) override {
    std::vector<Result<Reply>> found;
    auto ours = [this](const Reply& v) {
      return v.is_string() && v.str.starts_with(owner_prefix_);
    };
    for (auto& r : redis_.broadcast({{"GET", key_}}, deadline, {},
                                    quorum_then_the_rest(redis_.node_count()))) {
      if (!r) {
        found.push_back(r.failure());
        continue;
      }
      found.push_back(Reply{Reply::Type::integer, ours(r->front()) ? 1 : 0, "", {}});
    }
    return quorum_verdict(std::move(found), "held");
  }

private:
  // How many nodes make a quorum.
  size_t quorum() const { return redlock_quorum(redis_.node_count()); }

  // Every node must have the release before rlock exits, whatever the quorum said: a node
  // left out keeps the lock until its ttl. With REST answered, the others' replies are awaited
  // for a moment (Enough::Rest); either way a node whose connection broke under the release
  // (closed just as it went out) is asked once more.
  Result<bool> release_on_all(TimePoint deadline, Enough::Rest rest) {
    Argv keys{key_, queue_key_, alive_key_, ends_key_, phase_key_};
    Argv args{owner_prefix_, wake_prefix_};
    auto replies =
        eval_on_all(redis_, scripts::release, keys, args, deadline, Enough{quorum(), {}, rest});
    TimePoint again_until = std::min(deadline, Clock::now() + k_send_grace);
    for (size_t i = 0; i < replies.size(); ++i)
      if (!replies[i] && dropped(replies[i].failure()))
        replies[i] = eval(redis_.node(i), scripts::release, keys, args, again_until);
    std::optional<Failure> failure;
    bool released = false, answered = false;
    for (auto& r : replies) {
      if (!r) {
        failure = r.failure();
        continue;
      }
      answered = true;
      released = released || (r->is_integer() && r->integer == 1);
    }
    if (!answered && failure) return *failure;
    return released;
  }
};

}  // namespace

std::unique_ptr<Lock> make_quorum_lock(Redis& redis, std::string key, std::string token,
                                       LockMode mode) {
  return std::make_unique<QuorumLock>(redis, std::move(key), std::move(token), mode);
}

}  // namespace rlock
