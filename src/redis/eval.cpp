// Running a Script: by SHA1 (EVALSHA), and with its source (EVAL) on a server that answers
// NOSCRIPT; on one Redis, or on every node of Redlock at once (eval_on_all).
#include <algorithm>

#include "redis/redis.h"

namespace rlock {

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
  Enough rest{enough.needed > yes ? enough.needed - yes : 0, enough.yes, enough.rest, enough.grace};
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
