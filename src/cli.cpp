#include "cli.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <hiredis/hiredis.h>

#include "duration.h"
#include "error.h"
#include "lease.h"
#include "options.h"
#include "signals.h"
#include "verbs.h"

#ifndef RLOCK_VERSION
#define RLOCK_VERSION "0.0.0"
#endif

namespace rlock {

namespace {

// Shortest --ttl: renewals every ttl/3 and a drift of ttl/100 + 2 ms need some room to work.
constexpr Millis k_min_ttl{100};

constexpr const char* k_duration_help = "(500ms, 30s, 5m, 1h30m, 2d; a bare number is seconds)";

std::string version_text() {
  return std::string("rlock ") + RLOCK_VERSION + " (hiredis " + std::to_string(HIREDIS_MAJOR) +
         "." + std::to_string(HIREDIS_MINOR) + "." + std::to_string(HIREDIS_PATCH) + ")";
}

Millis positive_duration(const std::string& flag, const std::string& text) {
  auto d = parse_duration(text);
  if (!d) throw usage_error(flag + ": bad duration '" + text + "' " + k_duration_help);
  if (d->count() == 0) throw usage_error(flag + ": must be more than zero");
  return *d;
}

// The command-line state of one verb: CLI11 writes into strings; we turn them into options.
struct RunFlags {
  std::string ttl, wait, max_run, kill_after, min_hold, kill_signal = "TERM", on_lost = "kill";
  bool no_wait = false;
  std::optional<std::string> shell_command;
  int conflict_exit_code = k_exit_busy;
};

void add_common_options(CLI::App* app, GlobalOptions& global, bool& quiet, bool& verbose) {
  app->add_option("--redis", global.redis_urls,
                  "Redis URL: redis://[user[:pass]@]host[:port][/db] or unix:///path "
                  "(default $RLOCK_REDIS_URL, else redis://127.0.0.1:6379)")
      ->type_name("URL");
  app->add_option("--prefix", global.prefix, "prepended to every key")->type_name("TEXT");
  app->add_flag("-q,--quiet", quiet, "print only errors");
  app->add_flag("-v,--verbose", verbose, "print every event (acquired, renewed, released)");
}

RunOptions finish_run_options(RunFlags& flags, const std::string& key,
                              std::vector<std::string> command) {
  RunOptions o;
  if (key.empty()) throw usage_error("KEY must not be empty");
  o.key = key;
  if (flags.shell_command && !command.empty())
    throw usage_error("give either -c 'TEXT' or -- COMMAND, not both");
  if (!flags.shell_command && command.empty())
    throw usage_error("missing command: rlock run KEY -- COMMAND [ARG...], or -c 'TEXT'");
  o.command = std::move(command);
  o.shell_command = flags.shell_command;
  if (!flags.ttl.empty()) o.ttl = positive_duration("--ttl", flags.ttl);
  if (o.ttl < k_min_ttl) throw usage_error("--ttl: must be at least " + format_duration(k_min_ttl));
  if (flags.no_wait && !flags.wait.empty()) throw usage_error("--no-wait excludes --wait");
  if (!flags.wait.empty()) {
    if (flags.wait == "inf" || flags.wait == "infinity") {
      o.wait = Millis::max();
    } else {
      auto d = parse_duration(flags.wait);
      if (!d)
        throw usage_error("--wait: bad duration '" + flags.wait + "' " + k_duration_help +
                          ", or inf");
      if (d->count() > 0) o.wait = *d;
    }
  }
  if (flags.conflict_exit_code < 0 || flags.conflict_exit_code > 255)
    throw usage_error("--conflict-exit-code: " + std::to_string(flags.conflict_exit_code) +
                      " is not an exit status from 0 to 255");
  o.conflict_exit_code = flags.conflict_exit_code;
  if (!flags.max_run.empty()) o.max_run = positive_duration("--max-run", flags.max_run);
  if (!flags.min_hold.empty()) o.min_hold = positive_duration("--min-hold", flags.min_hold);
  auto sig = parse_signal(flags.kill_signal);
  if (!sig) throw usage_error("--kill-signal: unknown signal '" + flags.kill_signal + "'");
  o.kill_signal = *sig;
  if (!flags.kill_after.empty()) {
    o.kill_after = positive_duration("--kill-after", flags.kill_after);
    if (!kill_after_allowed(*o.kill_after, o.ttl))
      throw usage_error("--kill-after " + format_duration(*o.kill_after) +
                        " must be below half the ttl (" + format_duration(o.ttl / 2) + ")");
  }
  if (flags.on_lost != "kill" && flags.on_lost != "ignore")
    throw usage_error("--on-lost: '" + flags.on_lost + "' is neither kill nor ignore");
  o.on_lost = flags.on_lost == "ignore" ? RunOptions::OnLost::ignore : RunOptions::OnLost::kill;
  return o;
}

// argv split at the first "--": CLI11 sees what comes before, the command is what comes after
// (exec'd as given, so its own flags never reach our parser).
struct SplitArgs {
  std::vector<std::string> ours;
  std::vector<std::string> command;
};

SplitArgs split_at_double_dash(int argc, char** argv) {
  SplitArgs out;
  int i = 1;
  for (; i < argc && std::strcmp(argv[i], "--") != 0; ++i) out.ours.emplace_back(argv[i]);
  for (++i; i < argc; ++i) out.command.emplace_back(argv[i]);
  return out;
}

}  // namespace

int run_command_line(int argc, char** argv) {
  CLI::App app{"rlock: run a command as a cluster singleton, holding a Redis lock while it runs",
               "rlock"};
  app.set_version_flag("--version", version_text());
  app.require_subcommand(1);
  app.get_formatter()->column_width(34);
  app.footer("Exit status: the command's own; 64 usage, 69 Redis unavailable, 75 busy, 76 lock "
             "lost, 78 configuration, 124 --max-run, 125 rlock failed, 126/127 cannot run.\n"
             "See rlock(1).");

  GlobalOptions global;
  bool quiet = false, verbose = false;

  CLI::App* run = app.add_subcommand("run", "hold KEY while COMMAND runs");
  run->footer("Forms:\n"
              "  rlock run [OPTIONS] KEY -- COMMAND [ARG...]   COMMAND exec'd as given, no shell\n"
              "  rlock run [OPTIONS] KEY -c 'SHELL TEXT'        TEXT run by $SHELL -c\n\n"
              "The command gets RLOCK_KEY, RLOCK_TOKEN, RLOCK_FENCE and RLOCK_TTL_MS.\n"
              "Exit status: the command's own; 64 usage, 69 Redis unavailable, 75 busy, 76 lock "
              "lost, 78 configuration, 124 --max-run, 125 rlock failed, 126/127 cannot run.\n");
  std::string key;
  RunFlags flags;
  run->add_option("KEY", key, "the lock's Redis key (after --prefix)")->required();
  run->add_option("-c,--command", flags.shell_command,
                  "run TEXT with $SHELL -c (or /bin/sh) instead of COMMAND")
      ->type_name("TEXT");
  run->add_flag("-n,--no-wait", flags.no_wait, "fail at once when held (default)");
  run->add_option("-w,--wait", flags.wait,
                  std::string("wait up to D for the lock ") + k_duration_help + ", or inf")
      ->type_name("D");
  run->add_option("-E,--conflict-exit-code", flags.conflict_exit_code,
                  "exit status when the lock is not obtained (default 75)")
      ->type_name("N");
  run->add_option("--ttl", flags.ttl, "lock expiry, renewed every ttl/3 (default 30s)")
      ->type_name("D");
  run->add_option("--max-run", flags.max_run, "stop the command after D; exit 124")->type_name("D");
  run->add_option("--kill-signal", flags.kill_signal,
                  "signal that stops the command on loss or --max-run (default TERM)")
      ->type_name("SIG");
  run->add_option("--kill-after", flags.kill_after,
                  "send KILL this long after the kill signal (default 5s, or ttl/3 if shorter)")
      ->type_name("D");
  run->add_option("--on-lost", flags.on_lost,
                  "when the lock is lost: kill the command (default) or ignore it")
      ->type_name("kill|ignore");
  run->add_option("--min-hold", flags.min_hold,
                  "keep the lock until D after acquisition even if the command ends sooner")
      ->type_name("D");
  add_common_options(run, global, quiet, verbose);

  CLI::App* help = app.add_subcommand("help", "show the help of a command");
  std::string help_topic;
  help->add_option("COMMAND", help_topic, "run");

  SplitArgs args = split_at_double_dash(argc, argv);
  std::vector<std::string> reversed(args.ours.rbegin(), args.ours.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::string where = app.get_subcommands().empty()
                            ? "rlock --help"
                            : "rlock " + app.get_subcommands().front()->get_name() + " --help";
    std::string message = e.what();
    if (app.get_subcommands().empty() && !args.ours.empty() && args.ours.front()[0] != '-')
      message = "unknown command '" + args.ours.front() + "' (commands: run, help)";
    if (dynamic_cast<const CLI::ExtrasError*>(&e) && run->parsed()) {
      // CLI11 calls both an unknown flag and a command without '--' "not expected".
      std::vector<std::string> extras = run->remaining();
      if (!extras.empty() && extras.front().rfind("-", 0) == 0)
        message = "unknown option '" + extras.front() + "'";
      else
        message += " (put '--' before the command: rlock run KEY -- COMMAND)";
    }
    throw usage_error(message + "; see '" + where + "'");
  }

  if (help->parsed()) {
    if (help_topic.empty()) {
      std::fputs(app.help().c_str(), stdout);
      return k_exit_ok;
    }
    CLI::App* topic = nullptr;
    try {
      topic = app.get_subcommand(help_topic);
    } catch (const CLI::OptionNotFound&) {}
    if (!topic || topic == help) throw usage_error("help: no command '" + help_topic + "'");
    std::fputs(topic->help("rlock").c_str(), stdout);
    return k_exit_ok;
  }

  if (quiet && verbose) throw usage_error("-q and -v exclude each other");
  global.verbosity = quiet ? Verbosity::quiet : verbose ? Verbosity::verbose : Verbosity::normal;
  set_verbosity(global.verbosity);

  if (!args.command.empty() && !run->parsed())
    throw usage_error("'--' COMMAND is only for rlock run");
  RunOptions options = finish_run_options(flags, key, std::move(args.command));
  options.key = global.prefix + options.key;
  return run_verb(global, options);
}

}  // namespace rlock
