#include "settings.h"

#include "duration.h"
#include "error.h"
#include "lease.h"
#include "period.h"
#include "redis_url.h"
#include "sentinel.h"
#include "signals.h"

namespace rlock {

namespace {

// Shortest --ttl: renewals every ttl/3 and a drift of ttl/100 + 2 ms need some room to work.
constexpr Millis k_min_ttl{100};

constexpr const char* k_duration_help = "(500ms, 30s, 5m, 1h30m, 2d; a bare number is seconds)";

int rank(Origin::Kind kind) { return static_cast<int>(kind); }

[[noreturn]] void bad_value(const std::string& name, const RawValue& v, const std::string& why) {
  switch (v.origin.kind) {
  case Origin::Kind::flag: throw usage_error("--" + name + ": " + why);
  case Origin::Kind::file: throw Error(k_exit_config, v.origin.where + ": " + name + ": " + why);
  default: throw Error(k_exit_config, v.origin.where + ": " + why);
  }
}

const RawValue* lookup(const RawSettings& s, const std::string& name) {
  auto it = s.find(name);
  return it == s.end() ? nullptr : &it->second;
}

std::string single(const std::string& name, const RawValue& v) {
  if (v.values.size() != 1) bad_value(name, v, "expected one value");
  return v.values.front();
}

Millis positive_duration(const std::string& name, const RawValue& v) {
  std::string text = single(name, v);
  auto d = parse_duration(text);
  if (!d) bad_value(name, v, "bad duration '" + text + "' " + k_duration_help);
  if (d->count() == 0) bad_value(name, v, "must be more than zero");
  return *d;
}

std::optional<Millis> optional_duration(const RawSettings& s, const std::string& name) {
  const RawValue* v = lookup(s, name);
  if (!v) return std::nullopt;
  return positive_duration(name, *v);
}

// A whole number of at most DIGITS digits; else a bad value: "'x' is not WHAT".
int whole_number(const std::string& name, const RawValue& v, size_t digits, const char* what) {
  std::string n = single(name, v);
  if (n.empty() || n.size() > digits || n.find_first_not_of("0123456789") != std::string::npos)
    bad_value(name, v, "'" + n + "' is not " + what);
  return std::stoi(n);
}

bool flag_value(const std::string& name, const RawValue& v) {
  std::string text = single(name, v);
  if (text == "true") return true;
  if (text == "false") return false;
  bad_value(name, v, "expected true or false, not '" + text + "'");
}

}  // namespace

const std::vector<SettingInfo>& all_settings() {
  static const std::vector<SettingInfo> settings = {
      {"redis", SettingKind::list, k_default_redis_url, "Redis URL"},
      {"prefix", SettingKind::text, "", "prepended to every key"},
      {"password", SettingKind::secret, nullptr, "Redis password (environment or file only)"},
      {"password-file", SettingKind::text, nullptr, "file holding the Redis password"},
      {"cacert", SettingKind::text, nullptr, "CA certificate bundle for rediss://"},
      {"cacertdir", SettingKind::text, nullptr, "directory of CA certificates"},
      {"cert", SettingKind::text, nullptr, "client certificate"},
      {"key", SettingKind::text, nullptr, "client certificate's key"},
      {"sni", SettingKind::text, nullptr, "TLS server name"},
      {"connect-timeout", SettingKind::duration, "2s", "connect timeout"},
      {"command-timeout", SettingKind::duration, "3s", "timeout of one Redis command"},
      {"ttl", SettingKind::duration, "30s", "lock expiry"},
      {"wait", SettingKind::wait, "0s", "how long to wait for the lock"},
      {"conflict-exit-code", SettingKind::exit_code, "75", "exit status when not obtained"},
      {"max-run", SettingKind::duration, nullptr, "stop the command after this"},
      {"kill-signal", SettingKind::signal, "TERM", "signal that stops the command"},
      {"kill-after", SettingKind::duration, nullptr, "KILL this long after the kill signal"},
      {"on-lost", SettingKind::on_lost, "kill", "what to do when the lock is lost"},
      {"leftovers", SettingKind::text, "wait", "wait for or kill what the command left running"},
      {"min-hold", SettingKind::duration, nullptr, "keep the lock at least this long"},
      {"limit", SettingKind::count, nullptr, "up to N holders (a semaphore)"},
      {"min-replicas", SettingKind::count, nullptr, "replicas that must have the lock (WAIT)"},
      {"fair", SettingKind::flag, "false", "waiters in arrival order"},
      {"metrics-file", SettingKind::text, nullptr, "Prometheus textfile to add each run to"},
      {"once-per", SettingKind::text, nullptr, "run at most once per period"},
      {"tz", SettingKind::text, nullptr, "time zone of --once-per's calendar periods"},
      {"retry-failed", SettingKind::flag, "false", "--once-per: run again after a failed run"},
      {"record-skips", SettingKind::flag, "false", "record busy and done runs in the history"},
      {"history-length", SettingKind::count, "1000", "runs kept in each key's history"},
      {"quiet", SettingKind::flag, "false", "print only errors"},
      {"verbose", SettingKind::flag, "false", "print every event"},
      {"log-format", SettingKind::text, "text", "stderr events as text or json lines"},
  };
  return settings;
}

const SettingInfo* find_setting(const std::string& name) {
  for (const auto& s : all_settings())
    if (name == s.name) return &s;
  return nullptr;
}

RawSettings default_settings() {
  RawSettings out;
  for (const auto& s : all_settings())
    if (s.default_text)
      out[s.name] = RawValue{{s.default_text}, {Origin::Kind::default_value, "default"}};
  return out;
}

RawSettings environment_settings(const std::function<const char*(const char*)>& getenv) {
  RawSettings out;
  auto take = [&](const char* var, const char* name) {
    const char* v = getenv(var);
    if (v && *v && !out.count(name)) out[name] = RawValue{{v}, {Origin::Kind::environment, var}};
  };
  take("RLOCK_REDIS_URL", "redis");
  take("RLOCK_PASSWORD", "password");  // first: it wins over redis-cli's variable
  take("REDISCLI_AUTH", "password");
  return out;
}

void overlay(RawSettings& base, const RawSettings& top) {
  for (const auto& [name, value] : top) base[name] = value;
}

Resolved resolve_settings(const RawSettings& s) {
  Resolved r;
  GlobalOptions& g = r.global;
  RunOptions& o = r.run;

  if (const RawValue* v = lookup(s, "redis")) {
    if (v->values.empty()) bad_value("redis", *v, "no URL given");
    for (const auto& url : v->values) {
      try {
        if (is_sentinel_url(url))
          parse_sentinel_url(url);
        else
          parse_redis_url(url);
      } catch (const Error& e) {
        // A bad URL is a configuration error (78) wherever it came from.
        std::string where = v->origin.kind == Origin::Kind::flag ? "--redis" : v->origin.where;
        throw Error(k_exit_config, where + ": " + e.what());
      }
    }
    g.redis_urls = v->values;
  }
  if (const RawValue* v = lookup(s, "prefix")) g.prefix = single("prefix", *v);
  bool quiet = false, verbose = false;
  if (const RawValue* v = lookup(s, "quiet")) quiet = flag_value("quiet", *v);
  if (const RawValue* v = lookup(s, "verbose")) verbose = flag_value("verbose", *v);
  if (quiet && verbose) {
    const RawValue& later = *lookup(s, "verbose");
    bad_value("verbose", later, "-q and -v exclude each other");
  }
  g.verbosity = quiet ? Verbosity::quiet : verbose ? Verbosity::verbose : Verbosity::normal;
  if (const RawValue* v = lookup(s, "log-format")) {
    std::string f = single("log-format", *v);
    if (f != "text" && f != "json")
      bad_value("log-format", *v, "'" + f + "' is neither text nor json");
    g.log_format = f == "json" ? LogFormat::json : LogFormat::text;
  }

  // A password in the URL is used for that URL. Otherwise the higher-ranked of an inline
  // password (RLOCK_PASSWORD, REDISCLI_AUTH, the file's `password`) and a password file.
  const RawValue* password = lookup(s, "password");
  const RawValue* password_file = lookup(s, "password-file");
  if (password && password_file && password->origin.kind == Origin::Kind::file &&
      password_file->origin.kind == Origin::Kind::file)
    bad_value("password-file", *password_file, "give password or password-file, not both");
  if (password_file &&
      (!password || rank(password_file->origin.kind) >= rank(password->origin.kind)))
    g.password_file = single("password-file", *password_file);
  else if (password)
    g.connect.password = single("password", *password);

  auto text = [&](const char* name) {
    const RawValue* v = lookup(s, name);
    return v ? single(name, *v) : std::string();
  };
  g.connect.tls =
      TlsOptions{text("cacert"), text("cacertdir"), text("cert"), text("key"), text("sni")};
  if (auto d = optional_duration(s, "connect-timeout")) g.connect.connect_timeout = *d;
  if (auto d = optional_duration(s, "command-timeout")) g.connect.command_timeout = *d;

  if (auto d = optional_duration(s, "ttl")) o.ttl = *d;
  if (o.ttl < k_min_ttl)
    bad_value("ttl", *lookup(s, "ttl"), "must be at least " + format_duration(k_min_ttl));
  if (const RawValue* v = lookup(s, "wait")) {
    std::string w = single("wait", *v);
    if (w == "inf" || w == "infinity") {
      o.wait = Millis::max();
    } else {
      auto d = parse_duration(w);
      if (!d) bad_value("wait", *v, "bad duration '" + w + "' " + k_duration_help + ", or inf");
      if (d->count() > 0) o.wait = *d;
    }
  }
  if (const RawValue* v = lookup(s, "conflict-exit-code")) {
    std::string c = single("conflict-exit-code", *v);
    int code = -1;
    if (!c.empty() && c.size() <= 3 && c.find_first_not_of("0123456789") == std::string::npos)
      code = std::stoi(c);
    if (code < 0 || code > 255)
      bad_value("conflict-exit-code", *v, "'" + c + "' is not an exit status from 0 to 255");
    o.conflict_exit_code = code;
  }
  o.max_run = optional_duration(s, "max-run");
  o.min_hold = optional_duration(s, "min-hold");
  if (const RawValue* v = lookup(s, "kill-signal")) {
    std::string name = single("kill-signal", *v);
    auto sig = parse_signal(name);
    if (!sig) bad_value("kill-signal", *v, "unknown signal '" + name + "'");
    o.kill_signal = *sig;
  }
  if (const RawValue* v = lookup(s, "kill-after")) {
    o.kill_after = positive_duration("kill-after", *v);
    if (!kill_after_allowed(*o.kill_after, o.ttl))
      bad_value("kill-after", *v,
                format_duration(*o.kill_after) + " must be below half the ttl (" +
                    format_duration(o.ttl / 2) + ")");
  }
  if (const RawValue* v = lookup(s, "limit")) {
    int limit = whole_number("limit", *v, 6, "a number of holders from 1 up");
    if (limit < 1) bad_value("limit", *v, "'0' is not a number of holders from 1 up");
    o.limit = limit > 1 ? limit : 0;  // a semaphore of one is the plain lock, and shares its key
  }
  if (const RawValue* v = lookup(s, "fair")) o.fair = flag_value("fair", *v);
  // Behind Sentinel a lock must be on a replica before it counts: a failover promotes one,
  // and a lock only the old primary had would be granted again (README "Failover").
  if (g.redis_urls.size() == 1 && is_sentinel_url(g.redis_urls.front())) o.min_replicas = 1;
  if (const RawValue* v = lookup(s, "min-replicas"))
    o.min_replicas = whole_number("min-replicas", *v, 3, "a number of replicas from 0 to 999");
  if (const RawValue* v = lookup(s, "once-per")) {
    std::string text = single("once-per", *v);
    o.once_per = parse_period(text);
    if (!o.once_per)
      bad_value("once-per", *v,
                "'" + text + "' is neither hour, day, week, month nor a duration of whole " +
                    "seconds (1h, 1d, 1w ...)");
  }
  if (const RawValue* v = lookup(s, "tz")) {
    o.tz = single("tz", *v);
    if (!known_time_zone(*o.tz))
      bad_value("tz", *v,
                "unknown time zone '" + *o.tz + "' (a tzdata name such as Europe/Berlin)");
  }
  if (const RawValue* v = lookup(s, "retry-failed"))
    o.retry_failed = flag_value("retry-failed", *v);
  if (const RawValue* v = lookup(s, "record-skips"))
    o.record_skips = flag_value("record-skips", *v);
  if (const RawValue* v = lookup(s, "history-length"))
    o.history_length = whole_number("history-length", *v, 7, "a number of runs (0 keeps none)");
  if (const RawValue* v = lookup(s, "metrics-file")) {
    o.metrics_file = single("metrics-file", *v);
    if (o.metrics_file->empty()) bad_value("metrics-file", *v, "empty path");
  }
  if (const RawValue* v = lookup(s, "on-lost")) {
    std::string action = single("on-lost", *v);
    if (action != "kill" && action != "ignore")
      bad_value("on-lost", *v, "'" + action + "' is neither kill nor ignore");
    o.on_lost = action == "ignore" ? RunOptions::OnLost::ignore : RunOptions::OnLost::kill;
  }
  if (const RawValue* v = lookup(s, "leftovers")) {
    std::string action = single("leftovers", *v);
    if (action != "wait" && action != "kill")
      bad_value("leftovers", *v, "'" + action + "' is neither wait nor kill");
    o.leftovers = action == "kill" ? RunOptions::Leftovers::kill : RunOptions::Leftovers::wait;
  }
  return r;
}

std::string display_value(const std::string& name, const RawValue& value) {
  const SettingInfo* info = find_setting(name);
  if (info && info->kind == SettingKind::secret) return k_redacted_secret;
  std::string out;
  for (const auto& v : value.values) {
    if (!out.empty()) out += ", ";
    out += info && info->kind == SettingKind::list ? redact_url_text(v) : v;
  }
  return out;
}

}  // namespace rlock
