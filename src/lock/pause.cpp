#include "lock/pause.h"

#include "lock/lock.h"
#include "lock/scripts.h"
#include "redis/redlock.h"
#include "util/log.h"
#include "util/text.h"

namespace rlock {

namespace {

constexpr std::string_view k_pause_magic = "rlock-pause/1 ";

// The reply of pause.lua (one node's).
Result<Paused> decode_paused(const Reply& reply) {
  const auto& e = reply.elements;
  if (!reply.is_array() || e.empty() || !e[0].is_integer())
    return unexpected_reply("the pause script");
  Paused out;
  if (e[0].integer == 0) {
    out.ended_already = true;
    return out;
  }
  if (e.size() != 6 || !e[2].is_integer() || !e[5].is_integer())
    return unexpected_reply("the pause script");
  out.text = e[1].str;
  out.pttl = Millis(e[2].integer);
  out.replaced = e[3].str;
  out.held = e[4].integer == 1;
  out.replaced_pttl = Millis(e[5].integer);
  return out;
}

// Redlock: "2 of 5 Redlock nodes <DONE>, fewer than a quorum (3)", and why each of the others
// did not (FAILURES).
Failure without_quorum(const Redis& redis, size_t done, const std::string& what,
                       const std::vector<std::string>& failures) {
  std::string out = std::to_string(done) + " of " + std::to_string(redis.node_count()) +
                    " Redlock nodes " + what + ", fewer than a quorum (" +
                    std::to_string(redlock_quorum(redis.node_count())) + ")";
  for (size_t i = 0; i < failures.size(); ++i) out += (i ? "; " : ": ") + failures[i];
  return Failure{Failure::Kind::connect, out};
}

// Redlock: takes back on every node the pause SENT that fewer than a quorum took, and puts
// back what it replaced where that is known (TOOK: the nodes' replies), so that no run finds
// a pause on some nodes and not on others (unpause.lua).
void take_back(Redis& redis, const Argv& keys, const std::string& sent,
               const std::vector<Paused>& took) {
  Argv args{sent};
  for (const Paused& p : took) {
    args.push_back(p.text);
    args.push_back(p.replaced);
    args.push_back(std::to_string(p.replaced_pttl.count()));
  }
  // Done when as many nodes answered as took it, and the rest had their moment.
  Enough enough{std::max<size_t>(1, took.size()), {}, Enough::Rest::answered};
  for (auto& reply : eval_on_all(redis, scripts::unpause, {keys[0]}, args,
                                 Clock::now() + redis.command_timeout(), enough))
    if (!reply) log_warning("pause: not taken back: " + reply.failure().message);
}

}  // namespace

std::string encode_pause(const PauseInfo& p) {
  return std::string(k_pause_magic) + "by=" + p.by + " at=" + p.at + " until=" + p.until +
         " reason=" + p.reason;
}

std::optional<PauseInfo> decode_pause(std::string_view text) {
  if (text.substr(0, k_pause_magic.size()) != k_pause_magic) return std::nullopt;
  text.remove_prefix(k_pause_magic.size());
  PauseInfo p;
  while (!text.empty()) {
    size_t space = text.find(' ');
    std::string_view field = text.substr(0, space);
    size_t eq = field.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    std::string_view name = field.substr(0, eq);
    if (name == "reason") {
      p.reason = std::string(text.substr(eq + 1));  // the rest, spaces and all
      break;
    }
    std::string value(field.substr(eq + 1));
    if (name == "by") p.by = value;
    if (name == "at") p.at = value;
    if (name == "until") p.until = value;
    text = space == std::string_view::npos ? std::string_view{} : text.substr(space + 1);
  }
  if (p.by.empty()) return std::nullopt;
  return p;
}

std::string pause_text(const PauseInfo& p, Millis pttl) {
  std::string out = "paused by " + terminal_safe(p.by, 80) + " until " + terminal_safe(p.until, 40);
  if (pttl.count() >= 0) out += ", " + format_duration(pttl) + " from now";
  if (!p.reason.empty()) out += ": " + terminal_safe(p.reason, 200);
  return out;
}

std::string pause_text(std::string_view text, Millis pttl) {
  if (auto p = decode_pause(text)) return pause_text(*p, pttl);
  return "paused (\"" + terminal_safe(text, 80) + "\")";
}

Result<Paused> pause_lock(Redis& redis, const std::string& key, const PauseInfo& pause,
                          const PauseEnd& end, TimePoint deadline) {
  Argv keys{helper_key(key, "pause"), key, helper_key(key, "sem"), helper_key(key, "shared")};
  Argv args{encode_pause(pause), end.after ? "for" : "until",
            std::to_string(end.after ? end.after->count() : end.at->time_since_epoch().count())};
  if (redis.node_count() == 1) {
    auto reply = eval(redis, scripts::pause, keys, args, deadline);
    if (!reply) return reply.failure();
    return decode_paused(*reply);
  }
  // Redlock: every node at once, and it counts, as a lock does, only when a quorum took it:
  // then no quorum can be taken while it lasts, even with some of those nodes down. With
  // fewer it is taken back (docs/DESIGN.md, "Pausing a lock").
  std::vector<Paused> took;
  std::vector<std::string> failures;
  for (auto& reply : eval_on_all(redis, scripts::pause, keys, args, deadline,
                                 quorum_then_the_rest(redis.node_count()))) {
    auto paused = reply ? decode_paused(*reply) : Result<Paused>(reply.failure());
    if (paused && paused->ended_already) return *paused;
    if (paused)
      took.push_back(std::move(*paused));
    else
      failures.push_back(paused.failure().message);
  }
  if (took.size() < redlock_quorum(redis.node_count())) {
    // Taken back on every node: one that did not answer in time may have taken it all the same.
    take_back(redis, keys, args[0], took);
    return without_quorum(redis, took.size(), "took the pause", failures);
  }
  for (const std::string& failure : failures) log_warning("pause: " + failure);
  Paused out = took.front();
  for (const Paused& p : took) out.held = out.held || p.held;
  return out;
}

Result<std::optional<std::string>> resume_lock(Redis& redis, const std::string& key,
                                               TimePoint deadline) {
  Argv keys{helper_key(key, "pause"), helper_key(key, "queue"), helper_key(key, "alive")};
  Argv args{helper_key(key, "wake-")};
  // The pause it ended, from one node's reply.
  auto ended = [](Result<Reply> reply) -> Result<std::optional<std::string>> {
    if (!reply) return reply.failure();
    const auto& e = reply->elements;
    if (!reply->is_array() || e.empty() || !e[0].is_integer())
      return unexpected_reply("the resume script");
    if (e[0].integer == 1 && e.size() == 2) return std::optional(e[1].str);
    return std::optional<std::string>();
  };
  if (redis.node_count() == 1) return ended(eval(redis, scripts::resume, keys, args, deadline));
  // Redlock: every node at once. It counts when a quorum answered: a pause left on fewer
  // nodes keeps no quorum from forming, and ends at its time.
  std::optional<std::string> was;
  std::vector<std::string> failures;
  size_t answered = 0;
  for (auto& reply : eval_on_all(redis, scripts::resume, keys, args, deadline,
                                 quorum_then_the_rest(redis.node_count()))) {
    auto one = ended(std::move(reply));
    if (!one) {
      failures.push_back(one.failure().message);
      continue;
    }
    ++answered;
    if (!was) was = *one;
  }
  if (answered < redlock_quorum(redis.node_count()))
    return without_quorum(redis, answered, "answered", failures);
  for (const std::string& failure : failures) log_warning("resume: " + failure);
  return was;
}

}  // namespace rlock
