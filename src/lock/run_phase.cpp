#include "lock/run_phase.h"

#include <charconv>

#include "lock/lock_value.h"
#include "util/text.h"

namespace rlock {

namespace {

std::optional<int64_t> parse_number(std::string_view s) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// Sets the field NAME of P to VALUE; false when a number does not read as one. A field of a
// later rlock's is passed over.
bool set_field(StoredPhase& p, std::string_view name, const std::string& value) {
  RunPhase& r = p.phase;
  for (auto [field, text] : {std::pair{"why", &r.why}, std::pair{"signal", &r.signal},
                             std::pair{"by", &r.by}, std::pair{"reason", &r.reason}})
    if (name == field) {
      *text = value;
      return true;
    }
  auto n = parse_number(value);
  if (name == "since") p.since_ms = n.value_or(-1);
  if (name == "due") p.due_ms = n.value_or(-1);
  if (name == "attempt") r.attempt = static_cast<int>(n.value_or(-1));
  if (name == "attempts") r.attempts = static_cast<int>(n.value_or(-1));
  if (name == "status" && n) r.last_status = static_cast<int>(*n);
  bool number = name == "since" || name == "due" || name == "attempt" || name == "attempts" ||
                name == "status";
  return !number || n.has_value();
}

}  // namespace

const char* run_phase_name(RunPhase::Kind kind) {
  switch (kind) {
  case RunPhase::Kind::running: return "running";
  case RunPhase::Kind::stopping: return "stopping";
  case RunPhase::Kind::retrying: return "retrying";
  }
  return "running";
}

std::string encode_run_phase(const RunPhase& phase) {
  std::string out = run_phase_name(phase.kind);
  auto add = [&](const char* name, const std::string& value) {
    if (!value.empty()) out += std::string(" ") + name + "=" + escape_field(value);
  };
  if (phase.kind == RunPhase::Kind::stopping) {
    add("why", phase.why);
    add("signal", phase.signal);
    add("by", phase.by);
    add("reason", phase.reason);
  } else if (phase.kind == RunPhase::Kind::retrying) {
    add("attempt", std::to_string(phase.attempt));
    add("attempts", std::to_string(phase.attempts));
    if (phase.last_status) add("status", std::to_string(*phase.last_status));
  }
  return out;
}

std::optional<StoredPhase> decode_run_phase(std::string_view stored) {
  StoredPhase p;
  bool named = false;
  while (!stored.empty()) {
    size_t sp = stored.find(' ');
    std::string_view word = stored.substr(0, sp);
    stored = sp == std::string_view::npos ? std::string_view{} : stored.substr(sp + 1);
    size_t eq = word.find('=');
    if (eq == std::string_view::npos) {
      // The phase's name, after the times and before its fields.
      if (named) return std::nullopt;
      named = true;
      if (word == "stopping") p.phase.kind = RunPhase::Kind::stopping;
      else if (word == "retrying") p.phase.kind = RunPhase::Kind::retrying;
      else if (word != "running") return std::nullopt;
      continue;
    }
    auto value = percent_decode(word.substr(eq + 1));
    if (!value || !set_field(p, word.substr(0, eq), *value)) return std::nullopt;
  }
  if (!named || p.since_ms <= 0) return std::nullopt;
  return p;
}

}  // namespace rlock
