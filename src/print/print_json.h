// Every JSON document rlock writes to stdout (--json), with the stable snake_case fields the
// man pages list (JSON OUTPUT), each returned as the text to write. print_json.cpp is the only
// file that includes nlohmann/json.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lock/check.h"
#include "lock/lock_watch.h"
#include "print/lock_view.h"
#include "print/print.h"
#include "settings/settings.h"

namespace rlock {

// status and list: one lock of {"locks": [...]}, indented as an element of that array, without
// a newline at its end.
std::string listed_lock_json(const LockView& v);
// inspect: the lock with its queue, fence counter and retention.
std::string inspect_json(const LockView& v);
std::string history_json(const std::string& key, const std::vector<RunRecord>& runs);
// history_json() written run by run (HistoryPrinter): the head, with the key, that opens
// "runs"; each run as an element of that array (joined by ",\n"); the tail that closes both.
std::string history_head_json(const std::string& key);
std::string history_run_json(const RunRecord& run);
std::string history_tail_json();
std::string check_json(const CheckOptions& o, const CheckResult& r);
std::string acquired_json(const std::string& key, const std::string& token, int64_t fence,
                          Millis ttl);
std::string config_json(const RawSettings& settings, const std::optional<std::string>& config_file);

// watch: one compact object a line, each with the event's name and the time NOW.
std::string watch_start_json(const std::vector<std::string>& keys, const WatchMode& mode,
                             WallTime now);
std::string watch_event_json(const WatchEvent& e, WallTime now);
std::string watch_unreachable_json(const std::string& message, WallTime now);
std::string watch_reachable_json(Millis down, WallTime now);

// doctor's findings (print_findings).
std::string findings_json(const std::string& topology, const std::vector<Finding>& findings);

}  // namespace rlock
