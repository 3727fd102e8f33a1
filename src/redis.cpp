#include "redis.h"

#include <algorithm>
#include <charconv>

#include "connection.h"
#include "redis_node.h"

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

}  // namespace

Result<Reply> Redis::call(const Argv& argv, TimePoint deadline) {
  auto replies = pipeline({argv}, deadline);
  if (!replies) return replies.failure();
  Reply& reply = replies->front();
  if (reply.type == Reply::Type::error) return server_failure(reply.str);
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

Failure Redis::server_failure(const std::string& error) const {
  std::string code = error_code(error);
  // A server that wants a password cuts off long commands from a client that gave none, before
  // it would say NOAUTH.
  if (error.find("unauthenticated") != std::string::npos) code = "NOAUTH";
  std::string message = name() + ": " + error;
  if (const char* hint = hint_for(code)) message += " (" + std::string(hint) + ")";
  return Failure{Failure::Kind::server, message, code};
}

Result<std::vector<Reply>> NodeRedis::pipeline(const std::vector<Argv>& commands,
                                               TimePoint deadline) {
  auto sent = send(commands, deadline);
  if (!sent) return sent.failure();
  return receive(commands.size(), deadline);
}

Result<Reply> NodeRedis::blocking_call(const Argv& argv, TimePoint deadline, int interrupt_fd) {
  auto sent = send({argv}, deadline);
  if (!sent) return sent.failure();
  auto replies = receive(1, deadline, interrupt_fd);
  if (!replies) return replies.failure();
  if (replies->front().type == Reply::Type::error) return server_failure(replies->front().str);
  return std::move(replies->front());
}

Result<Unit> NodeRedis::send(const std::vector<Argv>& commands, TimePoint deadline) {
  // Closed while idle (a server's `timeout`, a proxy's idle limit): a new connection at once,
  // rather than a failed command and a warning for what is no trouble.
  if (conn_ && conn_->closed_while_idle()) conn_.reset();
  if (!conn_) {
    auto opened = Connection::open(url_, options_, deadline);
    if (!opened) return opened.failure();
    conn_ = std::move(*opened);
  }
  auto sent = conn_->send(commands, deadline);
  if (!sent) conn_.reset();  // a failed connection is dead; the next call makes a new one
  return sent;
}

Result<std::vector<Reply>> NodeRedis::receive(size_t count, TimePoint deadline, int interrupt_fd) {
  if (!conn_) return Failure{Failure::Kind::io, url_.endpoint() + ": not connected"};
  auto replies = conn_->receive(count, deadline, interrupt_fd);
  if (!replies) conn_.reset();
  return replies;
}

std::vector<Result<std::vector<Reply>>> exchange(const std::vector<NodeRedis*>& nodes,
                                                 const std::vector<std::vector<Argv>>& commands,
                                                 TimePoint deadline) {
  std::vector<Result<std::vector<Reply>>> out(nodes.size(), std::vector<Reply>{});
  std::vector<bool> sent(nodes.size(), false);
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (commands[i].empty()) continue;
    auto s = nodes[i]->send(commands[i], deadline);
    if (s)
      sent[i] = true;
    else
      out[i] = s.failure();
  }
  for (size_t i = 0; i < nodes.size(); ++i)
    if (sent[i]) out[i] = nodes[i]->receive(commands[i].size(), deadline);
  return out;
}

std::vector<Result<std::vector<Reply>>> Redis::broadcast(const std::vector<Argv>& commands,
                                                         TimePoint deadline,
                                                         const std::vector<bool>& to) {
  if (!to.empty() && !to[0]) return {std::vector<Reply>{}};
  return {pipeline(commands, deadline)};
}

Result<Unit> Redis::for_each_primary(const std::function<Result<Unit>(Redis&)>& f, TimePoint) {
  return f(*this);
}

Result<std::vector<Reply>> eval_then(Redis& redis, const Script& script, const Argv& keys,
                                     const Argv& args, const std::vector<Argv>& then,
                                     TimePoint deadline) {
  std::vector<Argv> commands;
  commands.reserve(1 + then.size());
  Argv& argv = commands.emplace_back();
  argv.reserve(3 + keys.size() + args.size());
  argv.push_back("EVALSHA");
  argv.emplace_back(script.sha1());
  argv.push_back(std::to_string(keys.size()));
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  commands.insert(commands.end(), then.begin(), then.end());
  auto replies = redis.pipeline(commands, deadline);
  if (!replies) return replies.failure();
  Reply& reply = replies->front();
  if (reply.type != Reply::Type::error) return replies;
  Failure failure = redis.server_failure(reply.str);
  if (failure.code != "NOSCRIPT") return failure;
  // THEN ran already; only the script is sent again, with its source.
  commands[0][0] = "EVAL";
  commands[0][1] = std::string(script.source());
  auto again = redis.call(commands[0], deadline);
  if (!again) return again.failure();
  reply = std::move(*again);
  return replies;
}

Result<Reply> eval(Redis& redis, const Script& script, const Argv& keys, const Argv& args,
                   TimePoint deadline) {
  auto replies = eval_then(redis, script, keys, args, {}, deadline);
  if (!replies) return replies.failure();
  return std::move(replies->front());
}

std::vector<Result<Reply>> eval_on_all(Redis& redis, const Script& script, const Argv& keys,
                                       const Argv& args, TimePoint deadline) {
  Argv argv{"EVALSHA", std::string(script.sha1()), std::to_string(keys.size())};
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<Result<Reply>> out;
  std::vector<bool> missing(redis.node_count(), false);  // nodes that answered NOSCRIPT
  auto replies = redis.broadcast({argv}, deadline);
  for (size_t i = 0; i < replies.size(); ++i) {
    if (!replies[i]) {
      out.push_back(replies[i].failure());
      continue;
    }
    Reply& r = replies[i]->front();
    if (r.type != Reply::Type::error) {
      out.push_back(std::move(r));
      continue;
    }
    Failure f = redis.node(i).server_failure(r.str);
    missing[i] = f.code == "NOSCRIPT";
    out.push_back(f);
  }
  if (std::find(missing.begin(), missing.end(), true) == missing.end()) return out;
  argv[0] = "EVAL";
  argv[1] = std::string(script.source());
  auto again = redis.broadcast({argv}, deadline, missing);
  for (size_t i = 0; i < again.size(); ++i) {
    if (!missing[i]) continue;
    if (!again[i])
      out[i] = again[i].failure();
    else if (again[i]->front().type == Reply::Type::error)
      out[i] = redis.node(i).server_failure(again[i]->front().str);
    else
      out[i] = std::move(again[i]->front());
  }
  return out;
}

}  // namespace rlock
