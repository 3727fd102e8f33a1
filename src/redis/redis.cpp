#include "redis/redis.h"

#include <poll.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "redis/connection.h"
#include "redis/redis_node.h"

namespace rlock {

namespace {

// What to do about the server errors an operator is likely to meet.
const char* hint_for(const std::string& code) {
  if (code == "NOAUTH")
    return "give the password in the URL, RLOCK_PASSWORD, REDISCLI_AUTH or --password-file";
  if (code == "WRONGPASS") return "the user or password is wrong";
  if (code == "READONLY") return "this is a read-only replica: point --redis at the primary";
  if (code == "OOM")
    return "Redis reached maxmemory and evicts nothing: free memory or raise maxmemory";
  if (code == "NOPERM") return "the ACL user may not run this command or touch this key";
  if (code == "MASTERDOWN") return "the replica lost its primary";
  return nullptr;
}

// The command that the line LINE of SCRIPT's text (as sent) calls, upper case; empty when the
// line calls none.
std::string command_on_line(const Script& script, int line) {
  std::string_view text = script.source();
  for (int n = 1; n < line && !text.empty(); ++n) {
    size_t nl = text.find('\n');
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
  }
  text = text.substr(0, text.find('\n'));
  size_t call = text.find("call('");
  if (call == std::string_view::npos) return "";
  std::string_view name = text.substr(call + 6);
  return std::string(name.substr(0, name.find('\'')));
}

}  // namespace

// Each server words it its own way (CONTRIBUTING.md, "Other servers"):
// - a command called inside the script: Redis 6.x and 7.0 say "The user executing the script
//   can't run this command or subcommand", and where ("@user_script:15", the line of the
//   script's text as sent, which names the command); Redis 7.2 and later and Valkey say
//   "ACL failure in script: User U has no permissions to run the 'time' command";
// - a key: "this user has no permissions to access one of the keys used as arguments" (Redis
//   6.x and 7.0, for the script's KEYS), "No permissions to access a key" (Redis 7.2 and later,
//   Valkey), "can't access at least one of the keys" (Redis 6.x and 7.0, inside the script).
std::optional<std::string> denied_in_script(const Script& script, const Argv& keys,
                                            std::string_view error) {
  std::string command;
  size_t at = error.find("permissions to run the '");
  if (error.find("ACL failure in script") != std::string_view::npos &&
      at != std::string_view::npos) {
    std::string_view name = error.substr(at + 24);
    command = std::string(name.substr(0, name.find('\'')));
  } else if (error.find("can't run this command") != std::string_view::npos) {
    at = error.find("@user_script:");
    if (at == std::string_view::npos) return std::nullopt;
    std::string_view digits = error.substr(at + 13);
    digits.remove_prefix(std::min(digits.find_first_not_of(' '), digits.size()));
    int line = 0;
    std::from_chars(digits.data(), digits.data() + digits.size(), line);
    command = command_on_line(script, line);
  }
  if (!command.empty()) {
    for (char& c : command)
      c = c == '|' ? ' ' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return "the ACL user may not run " + command + ", which rlock's scripts call: README " +
           "\"Least privilege\" has the ACL rules rlock needs";
  }
  for (const char* wording :
       {"permissions to access one of the keys", "No permissions to access a key",
        "can't access at least one of the keys"})
    if (error.find(wording) != std::string_view::npos) {
      std::string list;
      for (const std::string& key : keys) list += (list.empty() ? "" : ", ") + key;
      return "the ACL user's key patterns must allow every key of this lock: " + list;
    }
  return std::nullopt;
}

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

Result<Reply> Redis::call(const Argv& argv, TimePoint deadline) {
  auto replies = pipeline({argv}, deadline);
  if (!replies) return replies.failure();
  Reply& reply = replies->front();
  if (reply.type == Reply::Type::error) return server_failure(reply.str, argv);
  return std::move(reply);
}

std::string error_code(std::string_view error) {
  std::string_view code = error.substr(0, error.find(' '));
  if (code != "ERR" || error.find("Error running script") == std::string_view::npos)
    return std::string(code);
  // Redis 6.x wraps an error that a command inside a script returned: "ERR Error running
  // script (call to f_...): @user_script: 86: -READONLY You can't write against a read only
  // replica." The code is the word after " -".
  for (size_t at = error.find(" -"); at != std::string_view::npos; at = error.find(" -", at + 1)) {
    size_t start = at + 2, end = start;
    while (end < error.size() && error[end] >= 'A' && error[end] <= 'Z') ++end;
    if (end - start >= 2 && (end == error.size() || error[end] == ' '))
      return std::string(error.substr(start, end - start));
  }
  return std::string(code);
}

Failure unexpected_reply(std::string_view what) {
  return Failure{Failure::Kind::protocol, "unexpected reply to " + std::string(what)};
}

std::optional<int64_t> server_time_ms(const Reply& time) {
  if (!time.is_array() || time.elements.size() != 2) return std::nullopt;
  int64_t parts[2];
  for (int i = 0; i < 2; ++i) {
    const std::string& digits = time.elements[i].str;
    auto [end, err] = std::from_chars(digits.data(), digits.data() + digits.size(), parts[i]);
    if (err != std::errc() || end != digits.data() + digits.size() || digits.empty())
      return std::nullopt;
  }
  return parts[0] * 1000 + parts[1] / 1000;
}

Failure Redis::server_failure(const std::string& error, const Argv& command) const {
  Failure failure = server_failure(error);
  bool wrong_type = failure.code == "WRONGTYPE";
  if ((failure.code != "NOPERM" && !wrong_type) || command.empty() ||
      command[0].starts_with("EVAL"))
    return failure;
  // The key of a command rlock reads with: its first argument, or XREAD's after STREAMS.
  auto streams = std::find(command.begin(), command.end(), "STREAMS");
  std::string key = streams != command.end() && streams + 1 != command.end() ? streams[1]
                    : command.size() > 1                                     ? command[1]
                                                                             : "";
  if (wrong_type) {
    failure.message += " (" + key + " holds another type than rlock keeps there, which " +
                       command[0] + " refuses: another program's key? Deleting it lets rlock " +
                       "use it again)";
    return failure;
  }
  std::string denied =
      error.find("access") != std::string::npos && error.find("key") != std::string::npos
          ? "the ACL user's key patterns do not allow " + key + ", which rlock reads with " +
                command[0]
          : "the ACL user may not run " + command[0] + (key.empty() ? "" : " on " + key);
  failure.message = name() + ": " + error + " (" + denied +
                    ": README \"Least privilege\" has the ACL rules rlock needs)";
  return failure;
}

Failure Redis::server_failure(const std::string& error) const {
  std::string code = error_code(error);
  // A server that wants a password cuts off long commands from a client that gave none, before
  // it would say NOAUTH.
  if (error.find("unauthenticated") != std::string::npos) code = "NOAUTH";
  std::string message = name() + ": " + error;
  if (const char* hint = hint_for(code)) message += " (" + std::string(hint) + ")";
  return Failure{Failure::Kind::server, message, code};
}

Result<Connection*> NodeRedis::connection() {
  // Closed while idle (a server's `timeout`, a proxy's idle limit): a new connection at once,
  // rather than a failed command and a warning for what is no trouble.
  if (conn_ && conn_->closed_while_idle()) conn_.reset();
  if (conn_ && conn_->owing_since() &&
      Clock::now() - *conn_->owing_since() > options_.command_timeout)
    conn_.reset();
  if (!conn_) {
    auto started = Connection::start(url_, options_);
    if (!started) return started.failure();
    conn_ = std::move(*started);
  }
  return conn_.get();
}

Result<std::vector<Reply>> NodeRedis::pipeline(const std::vector<Argv>& commands,
                                               TimePoint deadline) {
  auto conn = connection();
  if (!conn) return conn.failure();
  auto replies = (*conn)->pipeline(commands, deadline);
  if (!replies) {
    drop();  // a failed connection is dead; the next call makes a new one
    return name_refused_command(*this, commands, replies.failure());
  }
  return replies;
}

Result<Reply> NodeRedis::blocking_send(const std::vector<Argv>& commands, TimePoint deadline,
                                       int interrupt_fd) {
  auto conn = connection();
  if (!conn) return conn.failure();
  auto replies = (*conn)->pipeline(commands, deadline, interrupt_fd);
  if (!replies) {
    drop();
    return replies.failure();
  }
  return std::move(replies->back());
}

Result<Reply> NodeRedis::blocking_call(const Argv& argv, TimePoint deadline, int interrupt_fd) {
  auto reply = blocking_send({argv}, deadline, interrupt_fd);
  if (reply && reply->type == Reply::Type::error) return server_failure(reply->str);
  return reply;
}

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
    } else if (!enough.yes || (!result->empty() && enough.yes(result->front()))) {
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
  while (!heard_enough()) {
    polled.clear();
    which.clear();
    TimePoint until = deadline;
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

std::vector<Result<std::vector<Reply>>> Redis::broadcast(const std::vector<Argv>& commands,
                                                         TimePoint deadline,
                                                         const std::vector<bool>& to,
                                                         const Enough&) {
  if (!to.empty() && !to[0]) return {std::vector<Reply>{}};
  return {pipeline(commands, deadline)};
}

Result<OwnConnection> Redis::own_connection(const std::string&, TimePoint) {
  return Failure{Failure::Kind::protocol, name() + ": no one server holds a key"};
}

Result<OwnConnection> NodeRedis::own_connection(const std::string&, TimePoint) {
  auto started = Connection::start(url_, options_);
  if (!started) return started.failure();
  return OwnConnection{std::move(*started), url_.db, name()};
}

Result<Unit> Redis::for_each_primary(const std::function<Result<Unit>(Redis&)>& f, TimePoint) {
  return f(*this);
}

namespace {

Argv script_command(const ScriptCall& call, bool with_source) {
  Argv argv;
  argv.reserve(3 + call.keys.size() + call.args.size());
  argv.push_back(with_source ? "EVAL" : "EVALSHA");
  argv.emplace_back(with_source ? call.script->source() : call.script->sha1());
  argv.push_back(std::to_string(call.keys.size()));
  argv.insert(argv.end(), call.keys.begin(), call.keys.end());
  argv.insert(argv.end(), call.args.begin(), call.args.end());
  return argv;
}

bool lacks_script(const Reply& reply) {
  return reply.type == Reply::Type::error && reply.str.starts_with("NOSCRIPT");
}

}  // namespace

Failure script_failure(const Redis& redis, const Script& script, const Argv& keys,
                       const std::string& error) {
  Failure failure = redis.server_failure(error);
  if (auto what = denied_in_script(script, keys, error)) {
    failure.message = redis.name() + ": " + error + " (" + *what + ")";
    failure.code = "NOPERM";
  } else if (failure.code == "WRONGTYPE" && !keys.empty()) {
    // The error does not say which key: rlock status names it (it reads each on its own).
    std::string list;
    for (const std::string& key : keys) list += (list.empty() ? "" : ", ") + key;
    failure.message += " (one of " + list + " holds another type than rlock keeps there: " +
                       "another program's key? rlock status of the lock names it; deleting it " +
                       "lets rlock use it again)";
  }
  return failure;
}

namespace {

// CALLS in one round trip; an error reply to the first is a Failure.
Result<std::vector<Reply>> eval_calls(Redis& redis, const std::vector<const ScriptCall*>& calls,
                                      TimePoint deadline) {
  std::vector<Argv> commands;
  commands.reserve(calls.size());
  for (const ScriptCall* c : calls) commands.push_back(script_command(*c, c->with_source));
  auto replies = redis.pipeline(commands, deadline);
  if (!replies) return replies.failure();
  // A server without a script (restarted, flushed, or a new one) ran nothing of that call:
  // those calls are sent again with their source, in the same order.
  std::vector<size_t> missing;
  commands.clear();
  for (size_t i = 0; i < calls.size(); ++i)
    if (lacks_script((*replies)[i])) {
      missing.push_back(i);
      commands.push_back(script_command(*calls[i], true));
    }
  if (!missing.empty()) {
    auto again = redis.pipeline(commands, deadline);
    if (!again) return again.failure();
    for (size_t k = 0; k < missing.size(); ++k) (*replies)[missing[k]] = std::move((*again)[k]);
  }
  const Reply& reply = replies->front();
  if (reply.type == Reply::Type::error)
    return script_failure(redis, *calls[0]->script, calls[0]->keys, reply.str);
  return replies;
}

}  // namespace

Result<std::vector<Reply>> eval_then(Redis& redis, const Script& script, const Argv& keys,
                                     const Argv& args, const std::vector<ScriptCall>& then,
                                     TimePoint deadline) {
  ScriptCall first{&script, keys, args};
  std::vector<const ScriptCall*> calls{&first};
  for (const ScriptCall& c : then) calls.push_back(&c);
  return eval_calls(redis, calls, deadline);
}

Result<Reply> eval(Redis& redis, const ScriptCall& call, TimePoint deadline) {
  auto replies = eval_calls(redis, {&call}, deadline);
  if (!replies) return replies.failure();
  return std::move(replies->front());
}

Result<Reply> eval(Redis& redis, const Script& script, const Argv& keys, const Argv& args,
                   TimePoint deadline) {
  return eval(redis, ScriptCall{&script, keys, args}, deadline);
}

std::vector<Result<Reply>> eval_on_all(Redis& redis, const Script& script, const Argv& keys,
                                       const Argv& args, TimePoint deadline, const Enough& enough) {
  Argv argv{"EVALSHA", std::string(script.sha1()), std::to_string(keys.size())};
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  // A node's reply to the script, or why it gave none; an error reply is a Failure.
  auto outcome = [&](size_t i, Result<std::vector<Reply>>& replies) -> Result<Reply> {
    if (!replies) return replies.failure();
    Reply& r = replies->front();
    if (r.type == Reply::Type::error) return script_failure(redis.node(i), script, keys, r.str);
    return std::move(r);
  };
  auto noscript = [](const Result<Reply>& r) { return !r && r.failure().code == "NOSCRIPT"; };
  std::vector<Result<Reply>> out;
  // A node that lacks the script answers NOSCRIPT: asked again below, it may yet say yes, so
  // this round ends once the yeses and those would do (not waiting for the slowest node).
  Enough first = enough;
  if (enough.yes)
    first.yes = [&enough](const Reply& r) {
      return r.type == Reply::Type::error ? error_code(r.str) == "NOSCRIPT" : enough.yes(r);
    };
  auto replies = redis.broadcast({argv}, deadline, {}, first);
  for (size_t i = 0; i < replies.size(); ++i) out.push_back(outcome(i, replies[i]));
  if (std::none_of(out.begin(), out.end(), noscript)) return out;
  // The script's source goes to the nodes that answered NOSCRIPT, and to those that had not
  // answered when the quorum had (they may lack it too; running it twice is harmless, as a
  // retry after a lost reply is), until a quorum has answered with the script run.
  std::vector<bool> again_to(out.size());
  size_t yes = 0;  // of the nodes that ran it: what ENOUGH counts
  for (size_t i = 0; i < out.size(); ++i) {
    again_to[i] = noscript(out[i]) || (!out[i] && out[i].failure().why == Failure::Why::late);
    bool ran = out[i] || (out[i].failure().kind == Failure::Kind::server && !noscript(out[i]));
    if (ran && (!enough.yes || (out[i] && enough.yes(*out[i])))) ++yes;
  }
  argv[0] = "EVAL";
  argv[1] = std::string(script.source());
  Enough rest{enough.needed > yes ? enough.needed - yes : 0, enough.yes};
  // The verdict is no already when those to ask again cannot make up the yeses missing: then
  // they are not asked (an acquire sent and not waited for could take the lock on a node).
  size_t to_ask = static_cast<size_t>(std::count(again_to.begin(), again_to.end(), true));
  if (enough.yes && rest.needed > to_ask) return out;
  auto again = redis.broadcast({argv}, deadline, again_to, rest);
  for (size_t i = 0; i < again.size(); ++i)
    if (again_to[i]) out[i] = outcome(i, again[i]);
  return out;
}

}  // namespace rlock
