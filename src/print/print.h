// How rlock speaks to people and to programs: text lines, or one JSON document (--json) with
// stable snake_case fields (the man pages, JSON OUTPUT). The verbs print only through here. What
// status, list, inspect and watch show of a lock is judged once (LockView, lock_view.h), then
// formatted as text (print_locks.cpp, print_inspect.cpp, print_watch.cpp) or JSON
// (print_json.cpp, the only file that includes nlohmann/json).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lock/check.h"
#include "lock/lock_state.h"
#include "lock/lock_watch.h"
#include "settings/settings.h"
#include "util/duration.h"

namespace rlock {

struct OutputStyle {
  bool json = false;
  bool color = false;  // ANSI colours: only on a terminal, never with NO_COLOR set
};
OutputStyle output_style(bool json);

// TEXT safe for a terminal (terminal_safe(): control characters and invalid UTF-8 as \xNN,
// valid UTF-8 as is), cut after MAX characters.
std::string printable(std::string_view text, size_t max = 80);
// KEY as printable() shows it, whole up to 80 characters; past them cut, with "..." and "#"
// and the first 8 hex digits of the whole key's SHA-1, so that two keys that share their first
// 80 characters still read as two (rlock-redis(7) "Escaped text").
std::string printable_key(std::string_view key);

// "web-2 pid 4121 (report.sh) for 3m12s, ttl 28.4s", or for a value rlock did not write
// "another client (value "…"), ttl 28.4s". PTTL < 0: the key has no TTL.
std::string describe_holder(std::string_view raw_value, Millis pttl);
// describe_holder(), or for a lock shared by SHARERS holders (--shared; RAW_VALUE the one whose
// place ends last): "3 shared holders; the last to end: web-2 pid 4121 ...".
std::string describe_holders(std::string_view raw_value, Millis pttl, int64_t sharers);
// A tombstone (release --force), V with its PTTL: "web-2 pid 4121 (report.sh) was broken by
// alice@ops-1 3s ago; free once it has stopped, in 8.2s at the latest".
std::string broken_text(const LockValue& v, Millis pttl);

// status and list: one aligned line per lock, or {"locks": [...]}.
void print_locks(const std::vector<LockState>& locks, const OutputStyle& style);

// print_locks() a batch at a time, each printed as it comes: the same lines, or the same JSON
// document written lock by lock. The text's key column needs every key first (fit()).
class LockPrinter {
public:
  explicit LockPrinter(const OutputStyle& style) : style_(style) {}
  // Before the first print(): KEY is one of the keys to come.
  void fit(std::string_view key);
  void print(const std::vector<LockState>& locks);
  // After the last print(): the end of the JSON document.
  void finish();

private:
  OutputStyle style_;
  size_t key_width_ = 0;
  bool printed_ = false;  // JSON: a lock is out, so the next one follows a comma
};

// inspect: everything known about one lock.
void print_inspect(const LockState& lock, const OutputStyle& style);
// history: the runs of KEY, newest first, one aligned line each (or JSON).
void print_history(const std::string& key, const std::vector<RunRecord>& runs,
                   const OutputStyle& style);
// print_history() a page at a time, each printed as it comes (history -n N reads N runs in
// pages, docs/DESIGN.md "Reads with a bound"): the columns as wide as the first page needs,
// wider when a later cell is; the JSON document written run by run.
class HistoryPrinter {
public:
  HistoryPrinter(const std::string& key, const OutputStyle& style) : key_(key), style_(style) {}
  void print(const std::vector<RunRecord>& runs);
  // After the last print(): the header of an empty history, or the end of the JSON document.
  void finish();

private:
  std::string key_;
  OutputStyle style_;
  std::vector<size_t> widths_;  // text: each column's, from the header and the rows so far
  bool printed_ = false;        // a run is out
};
// check: one line, "KEY: ok, last success ..." or what the last runs were instead (or JSON).
void print_check(const CheckOptions& options, const CheckResult& result, const OutputStyle& style);
// acquire: the token alone (so that t=$(rlock acquire k) works), or JSON.
void print_acquired(const std::string& key, const std::string& token, int64_t fence, Millis ttl,
                    const OutputStyle& style);
// config: each setting, its value and origin.
void print_config(const RawSettings& settings, const std::optional<std::string>& config_file,
                  const OutputStyle& style);

// watch: the first line, which says how it learns of changes to KEYS.
void print_watch_start(const std::vector<std::string>& keys, const WatchMode& mode,
                       const OutputStyle& style);
// watch: one line per event, timestamped, or one JSON object a line.
void print_watch_event(const WatchEvent& event, const OutputStyle& style);
// watch: Redis stopped answering (MESSAGE says why), and answers again after DOWN.
void print_watch_unreachable(const std::string& message, const OutputStyle& style);
void print_watch_reachable(Millis down, const OutputStyle& style);

// doctor: one thing found about the Redis setup.
struct Finding {
  enum class Level { ok, note, problem, unknown };  // unknown: could not be checked
  Level level = Level::ok;
  std::string topic;   // "persistence", "eviction", "failover" ...
  std::string server;  // the server's redacted URL; "" for the whole topology
  std::string text;    // what was found, why it matters, what to set (printable already)
};
// doctor's findings, a line each under the server they are of, then a count; or one JSON
// document ({"topology": ..., "findings": [...]}).
void print_findings(const std::string& topology, const std::vector<Finding>& findings,
                    const OutputStyle& style);
const char* level_name(Finding::Level level);

// Writes TEXT to stdout; throws Error(k_exit_internal) when stdout is gone: StdoutClosed when
// its reader went away (EPIPE), which a verb that streams lines may take for the end.
struct StdoutClosed : Error {
  using Error::Error;
};
void write_stdout(const std::string& text);

}  // namespace rlock
