// rlock pause KEY --for D | --until TIME: nobody takes KEY's lock, on any host, until then
// (pause.h); rlock resume (resume.cpp) ends it sooner.
#include "lock/pause.h"

#include <algorithm>
#include <ctime>

#include "lock/history.h"
#include "lock/lock_value.h"
#include "print/print.h"
#include "util/log.h"
#include "verbs/command.h"
#include "verbs/verbs.h"

namespace rlock {

namespace {

// A pause longer than this is said: it is likely a mistake.
constexpr Millis k_long_pause = std::chrono::hours(24);

// TEXT as a time: "10:30" or "10:30:00" (this host's local time, the next such moment),
// "2026-12-24 18:00" or "2026-12-24T18:00[:00]" (local time), or the same ending in Z (UTC).
std::optional<WallTime> parse_until(const std::string& text) {
  std::tm tm{};
  bool utc = !text.empty() && text.back() == 'Z';
  std::string t = utc ? text.substr(0, text.size() - 1) : text;
  std::replace(t.begin(), t.end(), ' ', 'T');
  auto whole = [&](const char* format) {
    tm = {};
    const char* end = ::strptime(t.c_str(), format, &tm);
    return end && *end == '\0';
  };
  bool clock_only = false;
  if (whole("%H:%M") || whole("%H:%M:%S")) {
    if (utc) return std::nullopt;
    clock_only = true;
  } else if (!whole("%Y-%m-%dT%H:%M") && !whole("%Y-%m-%dT%H:%M:%S")) {
    return std::nullopt;
  }
  std::time_t now = std::time(nullptr);
  if (clock_only) {
    std::tm today{};
    ::localtime_r(&now, &today);
    tm.tm_year = today.tm_year;
    tm.tm_mon = today.tm_mon;
    tm.tm_mday = today.tm_mday;
  }
  tm.tm_isdst = -1;
  std::tm asked = tm;
  std::time_t at = utc ? ::timegm(&tm) : std::mktime(&tm);
  // mktime makes February 30th March 2nd: a date that does not exist is refused instead.
  if (at == -1 || tm.tm_mday != asked.tm_mday || tm.tm_mon != asked.tm_mon ||
      tm.tm_year != asked.tm_year || tm.tm_hour != asked.tm_hour || tm.tm_min != asked.tm_min)
    return std::nullopt;
  if (clock_only && at <= now) {
    ++tm.tm_mday;  // the next such moment: tomorrow's
    tm.tm_isdst = -1;
    at = std::mktime(&tm);
  }
  return WallTime(std::chrono::seconds(at));
}

struct PauseOptions {
  PauseEnd end;
  std::string reason;
};

}  // namespace

int pause_verb(const GlobalOptions& global, const RunOptions& run, const std::string& key,
               const PauseOptions& options) {
  auto redis = connect_redis(global);
  PauseInfo pause{operator_name(), "-", "-", options.reason};
  auto paused =
      pause_lock(*redis, key, pause, options.end, Clock::now() + redis->command_timeout());
  if (!paused) return unavailable(paused.failure());
  if (paused->ended_already) {
    log_error(key + ": --until is not after the Redis server's time now; nothing changed");
    return k_exit_usage;
  }
  std::string line = printable_key(key) + ": " + pause_text(paused->text, paused->pttl);
  if (!paused->replaced.empty())
    line += "; it replaces the pause before (" + pause_text(paused->replaced, Millis(-1)) + ")";
  if (paused->held)
    line += "; the run that holds it goes on (rlock stop " + printable_key(key) + " ends it)";
  write_stdout(line + "\n");
  RunRecord entry = action_entry(RunEnd::pause, options.reason);
  if (auto now = decode_pause(paused->text)) entry.until = now->until;
  record_action(*redis, key, entry, run.history_length, run.retention);
  // A pause is for maintenance, an incident: a longer one is likely a typo (400d for 4d), and
  // keeps every host's runs out until then, so it is said.
  if (paused->pttl > k_long_pause)
    log_warning(printable_key(key) + ": paused for " + format_duration(paused->pttl) +
                ", longer than a day: no run starts until then (rlock resume " +
                printable_key(key) + " ends it sooner)");
  return k_exit_ok;
}

namespace {

struct PauseArgs : Arguments {
  std::string key;
  std::optional<std::string> for_, until, reason;

  int run(const Invocation& in) override {
    PauseOptions o;
    if (for_ && until) throw usage_error("give --for D or --until TIME, not both");
    if (!for_ && !until)
      throw usage_error("give --for D or --until TIME (how long the pause lasts)");
    if (for_) {
      o.end.after = positive_duration("--for", *for_);
    } else {
      o.end.at = parse_until(*until);
      if (!o.end.at)
        throw usage_error("--until: '" + *until +
                          "' is not a time (10:30, 2026-12-24 18:00, 2026-12-24T17:00:00Z)");
      // By this host's clock; the server's says the rest (pause_verb).
      auto now = std::chrono::system_clock::now();
      if (*o.end.at <= now) throw usage_error("--until: '" + *until + "' is past");
      if (*o.end.at - now > k_max_duration)
        throw usage_error("--until: '" + *until + "' is too far: at most " +
                          format_duration(k_max_duration) + " on");
    }
    o.reason = reason_argument(reason);
    return pause_verb(in.resolved.global, in.resolved.run, in.key(key), o);
  }
};

constexpr Option k_options[] = {
    option<&PauseArgs::key>("KEY", k_key_help).must(),
    option<&PauseArgs::for_>("--for", "pause for D from now (by the Redis server's clock)", "D"),
    option<&PauseArgs::until>("--until",
                              "pause until TIME: 10:30 (the next), 2026-12-24 18:00, in this "
                              "host's local time (TZ), or 2026-12-24T17:00:00Z (UTC); unlike "
                              "--once-per's periods, which are UTC unless --tz",
                              "TIME"),
    option<&PauseArgs::reason>("--reason", "why, shown to every run it keeps out", "TEXT")};

}  // namespace

constexpr Command k_pause_command = {
    "pause",
    "keep every host's runs of KEY from starting, for a while",
    "KEY --for D [--reason TEXT]\nKEY --until TIME [--reason TEXT]",
    {k_options, k_output, k_connection},
    "While paused, rlock run KEY exits 75 (-E changes it) with one line naming the pause\n"
    "(none with -q); a --wait run waits through it. A command already running is not\n"
    "touched (rlock stop).\n"
    "The pause ends by itself, leaving nothing in Redis, or with rlock resume KEY.\n"
    "Examples:\n"
    "  rlock pause lock:daily-report --for 2h --reason 'database upgrade'\n"
    "  rlock pause lock:sync --until 23:00\n"
    "Exit status: 0 paused, 69 Redis unreachable; 64 usage, 78 configuration, 125 rlock "
    "failed.",
    make_arguments<PauseArgs>};

}  // namespace rlock
