// rlock run's supervisor against a fake process group, lease and stop requests: a signal, a stop
// request, a lost lease and --max-run while an attempt runs and while the run waits for its next
// attempt. Signals are real (rlock's SignalEvents reads them), and so is the clock: the bounds
// checked are wide.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <doctest/doctest.h>
#include <vector>

#include "lock/lease.h"
#include "lock/stop_request.h"
#include "process/process_group.h"
#include "process/signals.h"
#include "run/supervisor.h"
#include "settings/options.h"
#include "util/fd.h"

using namespace rlock;

namespace {

// A pipe whose read end the supervisor polls; poke() makes it readable.
struct Wake {
  Fd read, write;
  Wake() {
    int p[2];
    REQUIRE(::pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0);
    read.reset(p[0]);
    write.reset(p[1]);
  }
  void poke() const { REQUIRE(::write(write.get(), "x", 1) == 1); }
  void drain() const {
    char buf[64];
    while (::read(read.get(), buf, sizeof buf) > 0) {}
  }
};

// A command's group that dies of the first signal it does not ignore (as a shell does of TERM),
// and tells of it as the kernel would: an exit event for poll(), and SIGCHLD to rlock. Or, as
// acquire --while-pid's process, not rlock's child (child = false): no SIGCHLD is its to send.
class FakeGroup : public ProcessGroup {
public:
  std::vector<int> ignored;  // signals it survives (KILL never is)
  int leftovers = 0;         // processes left in the group once the command exits
  bool child = true;
  Millis look{0};  // look_every()

  pid_t pid() const override { return 4242; }
  void signal_group(int sig) const override {
    got.push_back(sig);
    if (sig == SIGCONT || sig == SIGTSTP) return;
    if (sig == SIGKILL) leftovers_left = 0;
    bool ignore = sig != SIGKILL && std::find(ignored.begin(), ignored.end(), sig) != ignored.end();
    if (!ignore && !exited) end(128 + sig, true);
  }
  int live_group_members() const override { return (exited ? 0 : 1) + leftovers_left; }
  std::optional<Event> poll() override {
    if (events.empty()) return std::nullopt;
    Event e = events.front();
    events.pop_front();
    return e;
  }
  void stopping() override { told_stopping = true; }
  bool guardian_stopped_group() const override { return false; }
  std::optional<int> replace_dead_guardian() override { return std::nullopt; }
  bool rlocks_child() const override { return child; }
  Millis look_every() const override { return look; }

  // The command ends with STATUS (SIGNALLED: of a signal).
  void end(int status, bool signalled = false) const {
    exited = true;
    leftovers_left = leftovers;
    events.push_back({Event::Kind::exited, status, signalled});
    if (child) ::kill(::getpid(), SIGCHLD);
  }

  // What happened to it (a kill(2) to a group changes the group, not the sender).
  mutable std::vector<int> got;  // every signal sent to the group, in order
  mutable bool exited = false;
  mutable int leftovers_left = 0;
  mutable std::deque<Event> events;
  bool told_stopping = false;
};

class FakeLease : public Lease {
public:
  TimePoint end = Clock::now() + std::chrono::hours(1);
  State now = State::held;
  Wake wake;
  std::optional<Millis> renewed_for;  // renewed at every moment, for this ttl (not from END)

  TimePoint deadline() const override {
    return renewed_for && now == State::held ? Clock::now() + *renewed_for : end;
  }
  State state() const override { return now; }
  int wake_fd() const override { return wake.read.get(); }
  void drain_wakeups() override { wake.drain(); }
  // The renewal thread: due at once and started, unless a test says otherwise.
  std::optional<TimePoint> due;
  bool running = true;
  TimePoint start_due() const override { return due.value_or(Clock::now()); }
  bool started() const override { return running; }
  void start() override { running = true; }
  // As Renewals: "running", when nothing else was ever said, is no news.
  bool set_phase(const RunPhase& phase) override {
    phases.push_back(phase);
    news = news || phase.kind != RunPhase::Kind::running;
    return news;
  }
  bool news = false;
  std::vector<RunPhase> phases;  // every phase the supervisor announced, in order
  // A renewal found the lock another's: the keeper says so through its wake pipe.
  void lose() {
    now = State::not_mine;
    wake.poke();
  }
};

class FakeStops : public StopRequests {
public:
  std::optional<StopRequest> pending;
  Wake wake;

  int wake_fd() const override { return wake.read.get(); }
  std::optional<StopRequest> take() override {
    wake.drain();
    return std::exchange(pending, std::nullopt);
  }
  void ask(const std::string& by, int signal = 0, std::optional<Millis> kill_after = {}) {
    pending = StopRequest{by, "", "maintenance", signal, kill_after, 0, std::string(32, 'a')};
    wake.poke();
  }
};

RunOptions options() {
  RunOptions o;
  o.key = "lock:job";
  o.ttl = Millis(30000);
  o.kill_after = Millis(200);
  return o;
}

struct Setup {
  SignalEvents signals;  // before anything else: rlock's mask, and the signals it reads
  FakeLease lease;
  FakeStops stops;
  FakeGroup group;
  RunOptions opts = options();
  Supervisor make() {
    return Supervisor(opts, {lease, signals, nullptr, nullptr, &stops}, Clock::now());
  }
};

double seconds_since(TimePoint t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

TEST_CASE("an attempt that exits is its own end") {
  Setup s;
  Supervisor sv = s.make();
  s.group.end(3);
  AttemptEnd end = sv.watch(s.group);
  CHECK(end.end == RunEnd::exited);
  CHECK(end.status == 3);
  CHECK(!end.asked_to_stop);
  CHECK(s.group.got.empty());
}

TEST_CASE("a command that ends before the first renewal starts no renewal thread") {
  Setup s;
  s.lease.due = Clock::now() + std::chrono::hours(1);
  s.lease.running = false;
  Supervisor sv = s.make();
  s.group.end(0);
  AttemptEnd end = sv.watch(s.group);
  CHECK(end.end == RunEnd::exited);
  CHECK(!s.lease.running);
}

TEST_CASE("a signal to rlock is forwarded to the group and asks the run to stop") {
  Setup s;
  Supervisor sv = s.make();
  ::raise(SIGTERM);  // blocked by SignalEvents: pending until the supervisor reads it
  AttemptEnd end = sv.watch(s.group);
  CHECK(s.group.got == std::vector<int>{SIGTERM});
  CHECK(end.end == RunEnd::signalled);
  CHECK(end.status == 128 + SIGTERM);
  CHECK(end.asked_to_stop);
}

TEST_CASE("a stop request stops the group with the asked signal, then KILL") {
  Setup s;
  s.group.ignored = {SIGUSR1};
  Supervisor sv = s.make();
  s.stops.ask("alice@ops-1", SIGUSR1);
  TimePoint start = Clock::now();
  AttemptEnd end = sv.watch(s.group);
  CHECK(s.group.got == std::vector<int>{SIGUSR1, SIGCONT, SIGKILL});
  CHECK(s.group.told_stopping);
  CHECK(end.end == RunEnd::stopped);
  REQUIRE(end.stop);
  CHECK(end.stop->by == "alice@ops-1");
  CHECK(end.asked_to_stop);
  CHECK(seconds_since(start) >= 0.2);  // --kill-after
  CHECK(seconds_since(start) < 5);
}

TEST_CASE("a stop request announces its phase: who asked, the signal, when KILL is due") {
  Setup s;
  s.group.ignored = {SIGTERM};
  s.opts.kill_after = Millis(300);
  Supervisor sv = s.make();
  s.stops.ask("alice@ops-1");
  TimePoint start = Clock::now();
  sv.watch(s.group);
  REQUIRE(s.lease.phases.size() == 2);
  CHECK(s.lease.phases[0].kind == RunPhase::Kind::running);  // the attempt's start
  const RunPhase& p = s.lease.phases[1];
  CHECK(p.kind == RunPhase::Kind::stopping);
  CHECK(p.why == "stopped");
  CHECK(p.signal == "TERM");
  CHECK(p.by == "alice@ops-1");
  CHECK(p.reason == "maintenance");
  CHECK(p.since >= start);
  // KILL is due --kill-after from the moment the request was taken, a moment before the TERM.
  CHECK(p.due - p.since >= Millis(290));
  CHECK(p.due - p.since < Millis(1000));
}

TEST_CASE("a lost lease stops the group as lost, and a later stop request does not change it") {
  Setup s;
  s.group.ignored = {SIGTERM};
  Supervisor sv = s.make();
  s.lease.lose();
  s.stops.ask("bob@ops-2");
  AttemptEnd end = sv.watch(s.group);
  CHECK(end.end == RunEnd::lost);
  CHECK(sv.lost());
  CHECK(s.group.got.back() == SIGKILL);
}

TEST_CASE("--max-run stops the group, and announces its stop as max-run") {
  Setup s;
  s.opts.max_run = Millis(50);
  Supervisor sv = s.make();
  AttemptEnd end = sv.watch(s.group);
  CHECK(end.end == RunEnd::max_run);
  CHECK(s.group.got.front() == SIGTERM);
  CHECK(!end.asked_to_stop);
  REQUIRE(s.lease.phases.size() == 2);
  CHECK(s.lease.phases[1].kind == RunPhase::Kind::stopping);
  CHECK(s.lease.phases[1].why == "max-run");
  CHECK(s.lease.phases[1].by.empty());
}

TEST_CASE("--leftovers kill stops what the command left, and the end is still the command's") {
  Setup s;
  s.opts.leftovers = RunOptions::Leftovers::kill;
  s.group.leftovers = 2;
  s.group.ignored = {SIGTERM};
  Supervisor sv = s.make();
  s.group.end(0);
  AttemptEnd end = sv.watch(s.group);
  CHECK(end.end == RunEnd::exited);
  CHECK(end.status == 0);
  CHECK(s.group.got == std::vector<int>{SIGTERM, SIGCONT, SIGKILL});
}

TEST_CASE("between attempts: the delay passes, and the next attempt is the run's to start") {
  Setup s;
  Supervisor sv = s.make();
  s.group.end(1);
  AttemptEnd last = sv.watch(s.group);
  TimePoint start = Clock::now();
  CHECK(!sv.wait_until(Clock::now() + Millis(50), last, s.group));
  CHECK(seconds_since(start) >= 0.05);
}

TEST_CASE("between attempts: a signal ends the run as the last attempt ended") {
  Setup s;
  Supervisor sv = s.make();
  s.group.end(1);
  AttemptEnd last = sv.watch(s.group);
  ::raise(SIGINT);
  TimePoint start = Clock::now();
  auto end = sv.wait_until(Clock::now() + std::chrono::hours(1), last, s.group);
  REQUIRE(end);
  CHECK(end->end == RunEnd::exited);
  CHECK(end->status == 1);
  CHECK(end->between_attempts);
  CHECK(end->asked_to_stop);
  CHECK(seconds_since(start) < 5);
  CHECK(s.group.got.empty());  // its group is gone: nothing forwarded to it
}

TEST_CASE("between attempts: a stop request ends the run as stopped") {
  Setup s;
  Supervisor sv = s.make();
  s.group.end(1);
  AttemptEnd last = sv.watch(s.group);
  s.stops.ask("carol@ops-3");
  auto end = sv.wait_until(Clock::now() + std::chrono::hours(1), last, s.group);
  REQUIRE(end);
  CHECK(end->end == RunEnd::stopped);
  REQUIRE(end->stop);
  CHECK(end->stop->by == "carol@ops-3");
  CHECK(end->between_attempts);
}

TEST_CASE("between attempts: a lost lease ends the run as lost") {
  Setup s;
  Supervisor sv = s.make();
  s.group.end(1);
  AttemptEnd last = sv.watch(s.group);
  s.lease.lose();
  auto end = sv.wait_until(Clock::now() + std::chrono::hours(1), last, s.group);
  REQUIRE(end);
  CHECK(end->end == RunEnd::lost);
  CHECK(end->between_attempts);
}

TEST_CASE("between attempts: --max-run ends the run") {
  Setup s;
  s.opts.max_run = Millis(100);
  Supervisor sv = s.make();
  s.group.end(1);
  AttemptEnd last = sv.watch(s.group);
  auto end = sv.wait_until(Clock::now() + std::chrono::hours(1), last, s.group);
  REQUIRE(end);
  CHECK(end->end == RunEnd::max_run);
}

// The one rule for a stop's KILL (rlock-stop(1)): the whole asked kill-after, however much
// longer than the lease, while renewals hold it; the loss's own rule should they fail.
TEST_CASE("a stop's KILL waits for the asked kill-after past the lease's end while it is renewed") {
  Setup s;
  s.lease.renewed_for = Millis(300);  // a 300ms lease, renewed all along
  s.group.ignored = {SIGTERM};
  Supervisor sv = s.make();
  s.stops.ask("alice@ops-1", 0, Millis(1000));
  TimePoint start = Clock::now();
  AttemptEnd end = sv.watch(s.group);
  CHECK(s.group.got == std::vector<int>{SIGTERM, SIGCONT, SIGKILL});
  CHECK(seconds_since(start) >= 1.0);  // not at the lease's end
  CHECK(seconds_since(start) < 5);
  CHECK(end.end == RunEnd::stopped);
  CHECK(!sv.lost());
}

TEST_CASE("a loss while a stop waits for its kill-after brings the KILL forward") {
  Setup s;
  s.group.ignored = {SIGTERM};
  Supervisor sv = s.make();
  s.stops.ask("alice@ops-1", 0, Millis(3600 * 1000));
  s.lease.end = Clock::now() + Millis(300);
  TimePoint start = Clock::now();
  AttemptEnd end = sv.watch(s.group);
  CHECK(s.group.got.back() == SIGKILL);
  CHECK(seconds_since(start) < 5);
  CHECK(end.end == RunEnd::lost);
  CHECK(sv.lost());
}

TEST_CASE("a group that is not rlock's child is looked at without SIGCHLD") {
  Setup s;
  s.group.child = false;
  s.group.look = Millis(10);
  Supervisor sv = s.make();
  s.group.end(0);  // no SIGCHLD: only a look finds it
  AttemptEnd end = sv.watch(s.group);
  CHECK(end.end == RunEnd::exited);
}

TEST_CASE("a signal to rlock stops a group that is not its child as a stop would") {
  Setup s;
  s.group.child = false;
  s.group.look = Millis(10);
  s.group.ignored = {SIGTERM};
  Supervisor sv = s.make();
  ::raise(SIGUSR2);  // not forwarded: the group gets the kill signal, then KILL
  TimePoint start = Clock::now();
  AttemptEnd end = sv.watch(s.group);
  CHECK(s.group.got == std::vector<int>{SIGTERM, SIGCONT, SIGKILL});
  CHECK(seconds_since(start) >= 0.2);  // --kill-after
  CHECK(end.asked_to_stop);
  CHECK(!sv.lost());
}

TEST_CASE("under --on-lost ignore a signal to rlock lets a group that is not its child go") {
  Setup s;
  s.group.child = false;
  s.group.look = Millis(10);
  s.opts.on_lost = RunOptions::OnLost::ignore;
  Supervisor sv = s.make();
  ::raise(SIGTERM);
  AttemptEnd end = sv.watch(s.group);
  CHECK(s.group.got.empty());
  CHECK(!s.group.exited);
  CHECK(end.asked_to_stop);
}
