// rlock history KEY: the latest runs of a key, from its history stream (history.h).
#include "lock/history.h"

#include "print/print.h"
#include "util/log.h"
#include "verbs/command.h"
#include "verbs/verbs.h"

namespace rlock {

int history_verb(const GlobalOptions& global, const std::string& key, int count, bool json) {
  auto redis = connect_redis(global);
  // Page by page, each printed as it comes: memory holds a page, however many runs are asked
  // for (docs/DESIGN.md, "Reads with a bound").
  HistoryPrinter printer(key, output_style(json));
  auto unanswered = page_history(*redis, key, count, Clock::now() + redis->command_timeout(),
                                 [&](const std::vector<RunRecord>& runs) { printer.print(runs); });
  if (!unanswered) return unavailable(unanswered.failure());
  printer.finish();
  for (const std::string& node : *unanswered)
    log(Level::warning, {"history_incomplete", key,
                         "no answer from " + node + ": the runs recorded there are not shown"});
  return k_exit_ok;
}

namespace {

struct HistoryArgs : Arguments {
  std::string key;
  int count = 10;
  bool json = false;

  int run(const Invocation& in) override {
    return history_verb(in.resolved.global, in.key(key), count, json);
  }
};

constexpr Option k_options[] = {
    option<&HistoryArgs::key>("KEY", k_key_help).must(),
    option<&HistoryArgs::count>(
        "-n,--count", "how many runs, 1 to 100000 (default 10); run's -n is --no-wait", "N")
        .range(1, 100000),
    option<&HistoryArgs::json>("--json", k_json_help)};

}  // namespace

constexpr Command k_history_command = {
    "history",
    "the latest runs of KEY, newest first",
    "KEY",
    {k_options, k_output, k_connection},
    "Examples:\n"
    "  rlock history lock:daily-report\n"
    "  rlock history -n 5 --json lock:daily-report\n"
    "Exit status: 0, also when there is no history yet; 69 Redis unreachable; 64 usage, "
    "78 configuration, 125 rlock failed.",
    make_arguments<HistoryArgs>};

}  // namespace rlock
