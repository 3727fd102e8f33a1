#include "settings/settings.h"

#include "lock/lease.h"
#include "process/signals.h"
#include "redis/redis_url.h"
#include "redis/sentinel.h"
#include "settings/job_settings.h"
#include "settings/setting_value.h"
#include "util/byte_size.h"
#include "util/duration.h"
#include "util/error.h"
#include "util/period.h"
#include "util/text.h"

namespace rlock {

namespace {

// Shortest --ttl: renewals every ttl/3 and a drift of ttl/100 + 2 ms need some room to work.
constexpr Millis k_min_ttl{100};

int rank(Origin::Kind kind) { return static_cast<int>(kind); }

const RawValue* lookup(const RawSettings& s, const std::string& name) {
  auto it = s.find(name);
  return it == s.end() ? nullptr : &it->second;
}

void apply_redis(const SettingValue& v, Resolved& r) {
  if (v.raw().values.empty()) v.bad("no URL given");
  for (const auto& url : v.raw().values) {
    try {
      if (is_sentinel_url(url))
        parse_sentinel_url(url);
      else
        parse_redis_seeds(url);
    } catch (const Error& e) {
      // A bad URL is a configuration error (78) wherever it came from.
      std::string where =
          v.raw().origin.kind == Origin::Kind::flag ? "--redis" : v.raw().origin.where;
      throw Error(k_exit_config, where + ": " + e.what());
    }
  }
  r.global.redis_urls = v.raw().values;
  r.global.redis_url_is_default = v.raw().origin.kind == Origin::Kind::default_value;
  if (r.global.redis_url_is_default)
    r.global.connect.default_address = parse_redis_url(k_default_redis_url).endpoint();
}

// --tls: redis-cli's habit of a plain URL and a flag for TLS. The URLs become rediss://.
void apply_tls(const SettingValue& v, Resolved& r) {
  if (!v.flag()) return;
  for (std::string& url : r.global.redis_urls) {
    for (std::string_view plain : {"redis://", "redis-sentinel://"}) {
      if (url.starts_with(plain)) {
        url.insert(std::string_view("redis").size(), "s");
        break;
      }
    }
    // Wherever the URL came from, the pair is a configuration error (78), as a bad URL is.
    if (url.starts_with("unix:"))
      throw Error(k_exit_config, "--tls: a unix:// socket has no TLS; give a host's URL");
  }
}

void apply_wait(const SettingValue& v, Resolved& r) {
  std::string w = v.single();
  if (w == "inf" || w == "infinity") {
    r.run.wait = Millis::max();
    return;
  }
  Millis d = v.duration(w, ", or inf");
  r.run.wait = d.count() > 0 ? std::optional<Millis>(d) : std::nullopt;
}

void apply_retention(const SettingValue& v, Resolved& r) {
  std::string text = v.single();
  if (text == "inf" || text == "infinity") {
    r.run.retention = Millis(0);
    return;
  }
  r.run.retention = v.positive_duration();
}

void apply_conflict_exit_code(const SettingValue& v, Resolved& r) {
  std::string c = v.single();
  int code = -1;
  if (!c.empty() && c.size() <= 3 && c.find_first_not_of("0123456789") == std::string::npos)
    code = std::stoi(c);
  if (code < 0 || code > 255) v.bad("'" + c + "' is not an exit status from 0 to 255");
  r.run.conflict_exit_code = code;
}

void apply_kill_signal(const SettingValue& v, Resolved& r) {
  std::string name = v.single();
  auto sig = parse_signal(name);
  if (!sig) v.bad("unknown signal '" + name + "'");
  r.run.kill_signal = *sig;
}

void apply_kill_after(const SettingValue& v, Resolved& r) {
  r.run.kill_after = v.positive_duration();
  // After ttl in all_settings(), so the ttl is known.
  if (!kill_after_allowed(r.run.kill_after, r.run.ttl))
    v.bad(format_duration(r.run.kill_after) + " must be below half the ttl (" +
          format_duration(r.run.ttl / 2) + ")");
}

void apply_limit(const SettingValue& v, Resolved& r) {
  int limit = v.whole_number(6, "a number of holders from 1 to 999999");
  if (limit < 1) v.bad("'0' is not a number of holders from 1 to 999999");
  r.run.limit = limit > 1 ? limit : 0;  // a semaphore of one is the plain lock, and shares its key
}

void apply_once_per(const SettingValue& v, Resolved& r) {
  std::string text = v.single();
  r.run.once_per = parse_period(text);
  if (!r.run.once_per && duration_too_long(text))
    v.bad("'" + text + "' is too long: at most " + format_duration(k_max_duration));
  if (!r.run.once_per)
    v.bad("'" + text + "' is neither hour, day, week, month nor a duration of whole " +
          "seconds (1h, 6h, 1d, 7d ...)");
}

void apply_tz(const SettingValue& v, Resolved& r) {
  r.run.tz = v.single();
  if (!known_time_zone(*r.run.tz))
    v.bad("unknown time zone '" + *r.run.tz + "' (a tzdata name such as Europe/Berlin)");
}

void apply_keep_output(const SettingValue& v, Resolved& r) {
  const std::string& text = v.single();
  auto size = parse_byte_size(text);
  if (!size) v.bad("'" + text + "' is not a size (64k, 1M, 16MiB; 0 keeps nothing)");
  if (*size > k_max_keep_output)
    v.bad("'" + text + "' is too large: at most " + format_byte_size(k_max_keep_output));
  if (*size > 0 && *size < k_min_keep_output)
    v.bad("'" + text + "' is too small: at least " + format_byte_size(k_min_keep_output) +
          " (0 keeps nothing)");
  r.run.keep_output = *size;
}

void apply_metrics_file(const SettingValue& v, Resolved& r) {
  r.run.metrics_file = v.single();
  if (r.run.metrics_file->empty()) v.bad("empty path");
}

}  // namespace

const std::vector<SettingInfo>& all_settings() {
  using K = SettingKind;
  using V = const SettingValue&;
  // Defaults that are constants elsewhere, as text.
  static const std::string connect_timeout = format_duration(k_default_connect_timeout);
  static const std::string command_timeout = format_duration(k_default_command_timeout);
  static const std::string ttl = format_duration(k_default_ttl);
  static const std::string retention = format_duration(k_default_retention);
  static const std::string busy = std::to_string(k_exit_busy);
  static const std::vector<SettingInfo> settings = {
      {"redis", "-u,--redis", K::list, k_default_redis_url, "URL",
       "where Redis is (default $RLOCK_REDIS_URL, else the config file's redis, else "
       "redis://127.0.0.1:6379): redis://[user[:pass]@]host[:port][/db], rediss://... (TLS), "
       "unix:///path[?db=N], redis://host:port,host:port (a Cluster's seeds), "
       "redis-sentinel://host[:port][,host...]/name or rediss-sentinel://...; given more "
       "than once: Redlock",
       apply_redis},
      {"tls", "--tls", K::flag, "false", nullptr,
       "use TLS for redis:// and redis-sentinel:// URLs, as rediss:// (redis-cli's --tls)",
       apply_tls},
      {"prefix", "--prefix", K::text, "", "TEXT", "prepended to every key",
       [](V v, Resolved& r) { r.global.prefix = v.single(); }},
      // The password and its file are weighed together (resolve_settings).
      {"password", nullptr, K::secret, nullptr, nullptr,
       "Redis password (environment or file only)", nullptr},
      {"password-file", "--password-file", K::text, nullptr, "FILE",
       "read the Redis password from FILE, again for each new connection (or use "
       "RLOCK_PASSWORD, REDISCLI_AUTH)",
       nullptr},
      {"password-command", "--password-command", K::command, nullptr, "CMD",
       "run CMD (/bin/sh -c) for each new connection: its first line of output is the Redis "
       "password (a token that rotates)",
       nullptr},
      {"cacert", "--cacert", K::text, nullptr, "FILE", "CA certificate bundle for rediss://",
       [](V v, Resolved& r) { r.global.connect.tls.cacert = v.single(); }},
      {"cacertdir", "--cacertdir", K::text, nullptr, "DIR", "directory of CA certificates",
       [](V v, Resolved& r) { r.global.connect.tls.cacertdir = v.single(); }},
      {"cert", "--cert", K::text, nullptr, "FILE", "client certificate for rediss://",
       [](V v, Resolved& r) { r.global.connect.tls.cert = v.single(); }},
      {"key", "--key", K::text, nullptr, "FILE", "private key of --cert",
       [](V v, Resolved& r) { r.global.connect.tls.key = v.single(); }},
      {"sni", "--sni", K::text, nullptr, "NAME", "TLS server name to send and verify",
       [](V v, Resolved& r) { r.global.connect.tls.sni = v.single(); }},
      {"connect-timeout", "--connect-timeout", K::duration, connect_timeout.c_str(), "D",
       "connect timeout (default 2s)",
       [](V v, Resolved& r) { r.global.connect.connect_timeout = v.positive_duration(); }},
      {"command-timeout", "--command-timeout", K::duration, command_timeout.c_str(), "D",
       "timeout of one Redis command (default 3s)",
       [](V v, Resolved& r) { r.global.connect.command_timeout = v.positive_duration(); }},
      {"ttl", "--ttl", K::duration, ttl.c_str(), "D",
       "the lock's expiry, renewed every ttl/3 (default 30s; at least 100ms)",
       [](V v, Resolved& r) {
         r.run.ttl = v.positive_duration();
         if (r.run.ttl < k_min_ttl) v.bad("must be at least " + format_duration(k_min_ttl));
       }},
      {"wait", "-w,--wait,--timeout", K::wait, "0s", "D",
       "wait up to D for the lock, or inf for as long as it takes (default: fail at once)",
       apply_wait},
      {"jitter", "--jitter", K::duration, nullptr, "D",
       "wait a random time in [0, D) before the first try: spreads a fleet's cron herd and "
       "which host wins",
       [](V v, Resolved& r) { r.run.jitter = v.positive_duration(); }},
      {"conflict-exit-code", "-E,--conflict-exit-code", K::exit_code, busy.c_str(), "N",
       "exit status when the lock is not obtained, 0 to 255 (default 75)",
       apply_conflict_exit_code},
      {"max-run", "--max-run", K::duration, nullptr, "D",
       "stop the command after D, and exit 124 (default: no limit)",
       [](V v, Resolved& r) { r.run.max_run = v.positive_duration(); }},
      {"heartbeat-file", "--heartbeat-file", K::text, nullptr, "PATH",
       "the command touches PATH to show it is alive ($RLOCK_HEARTBEAT_FILE); needs "
       "--stale-after",
       [](V v, Resolved& r) {
         if (v.single().empty()) v.bad("empty path");
         r.run.heartbeat_file = v.single();
       }},
      {"stale-after", "--stale-after", K::duration, nullptr, "D",
       "stop the command as hung when PATH has not changed for D; exit 79",
       [](V v, Resolved& r) { r.run.stale_after = v.positive_duration(); }},
      {"kill-signal", "--kill-signal", K::signal, "TERM", "SIG",
       "signal that stops the command on loss, --max-run or a stale heartbeat (default TERM)",
       apply_kill_signal},
      {"kill-after", "--kill-after", K::duration, nullptr, "D",
       "send KILL this long after the kill signal (default 5s, or ttl/3 if shorter; below "
       "ttl/2)",
       apply_kill_after},
      {"on-lost", "--on-lost", K::on_lost, "kill", "kill|ignore",
       "when the lock is lost: kill the command (default) or ignore it",
       [](V v, Resolved& r) {
         r.run.on_lost =
             v.choice("kill", "ignore") ? RunOptions::OnLost::ignore : RunOptions::OnLost::kill;
       }},
      {"leftovers", "--leftovers", K::text, "wait", "wait|kill",
       "processes the command left in its process group: wait for them, holding the lock "
       "(default), or kill them",
       [](V v, Resolved& r) {
         r.run.leftovers =
             v.choice("wait", "kill") ? RunOptions::Leftovers::kill : RunOptions::Leftovers::wait;
       }},
      {"min-hold", "--min-hold", K::duration, nullptr, "D",
       "keep the lock until D after acquisition even if the command ends sooner",
       [](V v, Resolved& r) { r.run.min_hold = v.positive_duration(); }},
      {"limit", "--limit", K::count, nullptr, "N",
       "a semaphore: up to N holders at once, 1 to 999999 (give the same N everywhere for a "
       "key)",
       apply_limit},
      {"min-replicas", "--min-replicas", K::count, nullptr, "N",
       "start only once N replicas have the lock (WAIT), and renew likewise (default 0; 1 "
       "behind Sentinel)",
       [](V v, Resolved& r) {
         r.run.min_replicas = v.whole_number(3, "a number of replicas from 0 to 999");
       }},
      {"fair", "--fair", K::flag, "false", nullptr, "serve waiters in arrival order",
       [](V v, Resolved& r) { r.run.fair = v.flag(); }},
      {"shared", "-s,--shared", K::flag, "false", nullptr,
       "share the lock with other --shared holders, as flock -s (default: held alone)",
       [](V v, Resolved& r) { r.run.shared = v.flag(); }},
      {"metrics-file", "--metrics-file", K::text, nullptr, "PATH",
       "add this run's counters to a Prometheus textfile (node_exporter)", apply_metrics_file},
      {"once-per", "--once-per", K::text, nullptr, "PERIOD",
       "run at most once per period: hour, day, week (from Monday), month, or a duration "
       "(2m, 1h, 1d: windows counted from the Unix epoch, so 7d starts on Thursdays)",
       apply_once_per},
      {"tz", "--tz", K::text, nullptr, "ZONE",
       "time zone of --once-per's calendar periods, such as Europe/Berlin (default UTC, "
       "whatever the host's; pause --until reads the host's local time)",
       apply_tz},
      {"retry-failed", "--retry-failed", K::flag, "false", nullptr,
       "with --once-per: run again when this period's run failed, was stopped or never "
       "reported its end",
       [](V v, Resolved& r) { r.run.retry_failed = v.flag(); }},
      {"record-skips", "--record-skips", K::flag, "false", nullptr,
       "record busy and already-done runs in the history too",
       [](V v, Resolved& r) { r.run.record_skips = v.flag(); }},
      {"keep-output", "--keep-output", K::size, nullptr, "SIZE",
       "keep the last SIZE bytes of the command's stdout and stderr in Redis, for rlock logs: "
       "1k to 16M, or 0 for none (default 0); a terminal is left out",
       apply_keep_output},
      {"retry", "--retry", K::count, "0", "N",
       "run a command that failed up to N more times, under the same lock: 0 to 999 "
       "(default 0)",
       apply_retry},
      {"retry-delay", "--retry-delay", K::duration, "1s", "D",
       "wait D before the first retry, twice as long before each next one (default 1s; at "
       "most 1h)",
       apply_retry_delay},
      {"retry-on", "--retry-on", K::exit_code, nullptr, "CODES",
       "retry only these exit statuses (1,2,75 or 1-9; default any but 0)", apply_retry_on},
      {"notify", "--notify", K::command, nullptr, "CMD",
       "run CMD (/bin/sh -c) after the run, once the lock is given back, with the run in its "
       "environment (RLOCK_RESULT ...)",
       apply_notify},
      {"notify-on", "--notify-on", K::text, "failure", "failure|change|always",
       "when to run --notify: on a failure (default), on a change between failing and "
       "succeeding, or always",
       apply_notify_on},
      {"notify-after", "--notify-after", K::count, "1", "N",
       "tell a failure only from the Nth consecutive one across all hosts: 1 to 9999 (default "
       "1)",
       apply_notify_after},
      {"notify-timeout", "--notify-timeout", K::duration, "10s", "D",
       "stop --notify's command (KILL) after D (default 10s)", apply_notify_timeout},
      {"retention", "--retention", K::wait, retention.c_str(), "D",
       "how long a lock's fence counter and history outlive its last use (default 30d), or inf",
       apply_retention},
      {"history-length", "--history-length", K::count, "100", "N",
       "runs kept in the key's history: 0 (none) to 9999999 (default 100)",
       [](V v, Resolved& r) {
         r.run.history_length = v.whole_number(7, "a number of runs from 0 (none) to 9999999");
       }},
      {"quiet", "-q,--quiet", K::flag, "false", nullptr,
       "print only errors and warnings that a run may go unseen (no Redis configured, a "
       "metrics file not written)",
       [](V v, Resolved& r) {
         if (v.flag()) r.global.verbosity = Verbosity::quiet;
       }},
      {"verbose", "-v,--verbose", K::flag, "false", nullptr,
       "print every event (acquired, renewed, released)",
       // Beside quiet: resolve_settings weighs the two.
       [](V v, Resolved& r) {
         if (v.flag()) r.global.verbosity = Verbosity::verbose;
       }},
      {"log-format", "--log-format", K::text, "text", "text|json",
       "events on stderr as text (default) or json, one object a line",
       [](V v, Resolved& r) {
         r.global.log_format = v.choice("text", "json") ? LogFormat::json : LogFormat::text;
       }},
  };
  return settings;
}

const SettingInfo* find_setting(std::string_view name) {
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
  // In all_settings() order, which is also the order of precedence among bad values.
  for (const SettingInfo& info : all_settings()) {
    const RawValue* v = lookup(s, info.name);
    if (v && info.apply) info.apply(SettingValue(info.name, *v), r);
  }
  // The one place the kill-after default is derived (rlock config shows it).
  if (!lookup(s, "kill-after")) r.run.kill_after = default_kill_after(r.run.ttl);

  // A password in the URL is used for that URL. Otherwise the highest-ranked of an inline
  // password (RLOCK_PASSWORD, REDISCLI_AUTH, the file's `password`), a password file and a
  // password command; two of one rank (both in the config file, both flags) are a mistake.
  const char* const sources[] = {"password", "password-file", "password-command"};
  const char* chosen = nullptr;
  for (const char* name : sources) {
    const RawValue* v = lookup(s, name);
    if (!v) continue;
    const RawValue* best = chosen ? lookup(s, chosen) : nullptr;
    if (best && rank(v->origin.kind) == rank(best->origin.kind))
      SettingValue(name, *v).bad("give one of password, password-file and password-command");
    if (!best || rank(v->origin.kind) > rank(best->origin.kind)) chosen = name;
  }
  if (chosen) {
    std::string value = SettingValue(chosen, *lookup(s, chosen)).single();
    PasswordSource& source = r.global.connect.password;
    if (chosen == sources[0]) source.password = value;
    if (chosen == sources[1]) source.file = value;
    if (chosen == sources[2]) source.command = value;
    // Said with WRONGPASS: rlock config shows the same.
    const Origin& origin = lookup(s, chosen)->origin;
    std::string where = origin.kind == Origin::Kind::environment
                            ? "the environment's " + origin.where
                        : origin.kind == Origin::Kind::file ? "the config file, " + origin.where
                                                            : origin.where;
    r.global.connect.password_origin = chosen == sources[1]
                                           ? "the file " + value + " (" + where + ")"
                                       : chosen == sources[2] ? "the command of " + where
                                                              : where;
  }

  // --shared excludes --limit wherever each was given (--limit 1 too, which leaves no trace in
  // RunOptions). run_verb refuses --once-per, which only a run reads.
  // Given in two places, the one that counts more wins (-s over a file's limit, --limit over
  // its shared); in one place, they are a mistake.
  if (r.run.shared && lookup(s, "limit")) {
    int shared = rank(lookup(s, "shared")->origin.kind),
        limit = rank(lookup(s, "limit")->origin.kind);
    if (shared == limit)
      SettingValue("shared", *lookup(s, "shared"))
          .bad("excludes --limit: a shared lock has no number of places (a semaphore's are "
               "places of their own, not shared ones)");
    if (shared > limit)
      r.run.limit = 0;
    else
      r.run.shared = false;
  }

  // A heartbeat file needs its staleness; a config file's stale-after is a default for the runs
  // that name a file, but the flag alone is a mistake.
  const RawValue* heartbeat = lookup(s, "heartbeat-file");
  const RawValue* stale = lookup(s, "stale-after");
  if (heartbeat && heartbeat->origin.kind == Origin::Kind::file)
    SettingValue("heartbeat-file", *heartbeat)
        .bad("belongs on one job's command line: every run would share the file, and one job's "
             "touches would keep another alive");
  if (heartbeat && !stale)
    SettingValue("heartbeat-file", *heartbeat)
        .bad("needs --stale-after D: how long without a touch means the command is hung");
  if (stale && !heartbeat && stale->origin.kind == Origin::Kind::flag)
    SettingValue("stale-after", *stale)
        .bad("needs --heartbeat-file PATH: the file the command touches while it is alive");

  // quiet and verbose: the one given where it counts more wins (a flag over the file), as every
  // setting does; both in one place are a mistake, told with where the other came from.
  const RawValue* quiet = lookup(s, "quiet");
  const RawValue* verbose = lookup(s, "verbose");
  if (quiet && verbose && r.global.verbosity == Verbosity::verbose &&
      SettingValue("quiet", *quiet).flag()) {
    if (rank(quiet->origin.kind) == rank(verbose->origin.kind))
      SettingValue("verbose", *verbose)
          .bad("excludes quiet (" + quiet->origin.where + "): give one of the two");
    if (rank(quiet->origin.kind) > rank(verbose->origin.kind))
      r.global.verbosity = Verbosity::quiet;
  }

  check_job_settings(s, r);

  // Behind Sentinel a lock must be on a replica before it counts: a failover promotes one,
  // and a lock only the old primary had would be granted again (README "Failover and what a
  // Redis lock does not guarantee").
  const auto& urls = r.global.redis_urls;
  if (!lookup(s, "min-replicas") && urls.size() == 1 && is_sentinel_url(urls.front()))
    r.run.min_replicas = 1;
  return r;
}

void check_value(const std::string& name, const RawValue& value) {
  const SettingInfo* info = find_setting(name);
  if (!info || !info->apply) return;
  SettingValue v(name, value);
  Resolved scratch;
  switch (info->kind) {
  case SettingKind::duration:
    if (info->apply == apply_kill_after) {
      (void)v.positive_duration();  // below half the ttl: the ttl may come from elsewhere
      return;
    }
    [[fallthrough]];
  case SettingKind::wait:
  case SettingKind::exit_code:
  case SettingKind::count:
  case SettingKind::size:
  case SettingKind::signal:
  case SettingKind::on_lost: info->apply(v, scratch); return;
  default:
    if (info->apply == apply_once_per || info->apply == apply_notify_on) info->apply(v, scratch);
    return;
  }
}

std::string display_value(const std::string& name, const RawValue& value) {
  const SettingInfo* info = find_setting(name);
  if (info && info->kind == SettingKind::secret) return k_redacted_secret;
  // A command's arguments and assignments may hold secrets (VAULT_TOKEN=... vault ...).
  if (info && info->kind == SettingKind::command && !value.values.empty())
    return shell_command_summary(value.values.front());
  std::string out;
  for (const auto& v : value.values) {
    if (!out.empty()) out += ", ";
    out += info && info->kind == SettingKind::list ? redact_url_text(v) : v;
  }
  return out;
}

}  // namespace rlock
