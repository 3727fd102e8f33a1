#include "lock/pause.h"

#include "lock/lock.h"
#include "lock/scripts.h"
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
  if (e.size() != 5 || !e[2].is_integer()) return unexpected_reply("the pause script");
  out.text = e[1].str;
  out.pttl = Millis(e[2].integer);
  out.replaced = e[3].str;
  out.held = e[4].integer == 1;
  return out;
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
  // Redlock: every node, so that no quorum forms while it lasts. A node that fails is named,
  // and the others keep the pause: a failure only when none took it.
  std::optional<Paused> first;
  std::optional<Failure> failure;
  for (auto& reply : eval_on_all(redis, scripts::pause, keys, args, deadline, {})) {
    auto paused = reply ? decode_paused(*reply) : Result<Paused>(reply.failure());
    if (!paused) {
      log_warning("pause: " + paused.failure().message);
      failure = paused.failure();
      continue;
    }
    if (!first) first = *paused;
    first->held = first->held || paused->held;
  }
  if (!first) return *failure;
  return *first;
}

Result<std::optional<std::string>> resume_lock(Redis& redis, const std::string& key,
                                               TimePoint deadline) {
  Argv keys{helper_key(key, "pause"), helper_key(key, "queue"), helper_key(key, "alive")};
  Argv args{helper_key(key, "wake-")};
  // Every node, also past one that fails (it is named): a node left paused keeps out only
  // its own copy, and its pause ends at its time.
  std::optional<std::string> was;
  std::optional<Failure> failure;
  size_t answered = 0;
  for (size_t i = 0; i < redis.node_count(); ++i) {
    auto reply = eval(redis.node(i), scripts::resume, keys, args, deadline);
    if (!reply || !reply->is_array() || reply->elements.empty()) {
      failure = reply ? unexpected_reply("the resume script") : reply.failure();
      if (redis.node_count() > 1) log_warning("resume: " + failure->message);
      continue;
    }
    ++answered;
    if (reply->elements[0].integer == 1 && reply->elements.size() == 2 && !was)
      was = reply->elements[1].str;
  }
  if (answered == 0) return *failure;
  return was;
}

}  // namespace rlock
