// Which command a proxy refused (proxy.h): the commands rlock needs that a proxy may not pass,
// what rlock needs each for, and how to send each alone without effect.
#include "redis/proxy.h"

#include <algorithm>

#include "redis/connection.h"

namespace rlock {

namespace {

// A command that a proxy may not pass, what rlock needs it for, and how to send it without
// effect (ARGV: the command as rlock sent it). The commands every proxy passes (GET, SET,
// PEXPIRE, ZADD ...) are not here.
struct Needed {
  const char* name;
  const char* purpose;
  Argv (*probe)(const Argv& argv);
};

Argv as_sent(const Argv& argv) { return argv; }

const Needed k_needed[] = {
    {"TIME", "for the server's clock (fences, ttls, periods)", as_sent},
    {"EVALSHA", "for its scripts (taking, renewing and giving back a lock)",
     [](const Argv& argv) -> Argv {
       if (argv.size() < 4) return {"EVALSHA", std::string(40, 'f'), "0"};
       return {"EVALSHA", std::string(40, 'f'), "1", argv[3]};  // no such script: NOSCRIPT
     }},
    {"EVAL", "for its scripts (taking, renewing and giving back a lock)",
     [](const Argv& argv) -> Argv {
       if (argv.size() < 4) return {"EVAL", "return 0", "0"};
       return {"EVAL", "return 0", "1", argv[3]};
     }},
    {"XADD", "to record each run in the lock's history (and its kept output)",
     [](const Argv& argv) -> Argv {
       return {"XADD", argv.size() > 1 ? argv[1] : "x", "0-0", "probe", "0"};  // refused: 0-0
     }},
    {"XREVRANGE", "to read the lock's history", as_sent},
    {"XRANGE", "to read a run's kept output (logs)", as_sent},
    {"INFO", "to tell a Cluster from a single server", as_sent},
    {"SCAN", "to find the locks", as_sent},
};

}  // namespace

Failure name_refused_command(NodeRedis& node, const std::vector<Argv>& commands, Failure failure) {
  if (failure.why != Failure::Why::closed) return failure;
  std::vector<const Needed*> tried;
  for (const Argv& argv : commands) {
    if (argv.empty()) continue;
    const Needed* needed = nullptr;
    for (const Needed& n : k_needed)
      if (argv[0] == n.name) needed = &n;
    if (!needed || std::find(tried.begin(), tried.end(), needed) != tried.end()) continue;
    tried.push_back(needed);
    auto started = Connection::start(node.url(), node.options());
    if (!started) return failure;  // the server is down: that is the news
    TimePoint deadline = Clock::now() + node.command_timeout();
    // First a PING, which every proxy passes: a proxy whose server is down accepts the
    // connection and closes it at once, whatever comes.
    if (!(*started)->pipeline({{"PING"}}, deadline)) return failure;
    auto reply = (*started)->pipeline({needed->probe(argv)}, deadline);
    if (reply) continue;
    if (reply.failure().why != Failure::Why::closed) return failure;
    return Failure{Failure::Kind::io,
                   node.name() + " does not pass " + needed->name + ": rlock needs it " +
                       needed->purpose +
                       "; point rlock at Redis itself, or at a proxy that passes every command "
                       "(twemproxy closes the connection at those it does not)",
                   "", Failure::Why::refused_command};
  }
  return failure;
}

}  // namespace rlock
