// The pieces of text that several commands' output shares (output_*.cpp): a holder, a ttl, a
// run's result, a tombstone, a lock's state word and status line, rows under labels. Inside
// the print module only: the verbs print through print.h.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lock/history.h"
#include "print/lock_view.h"
#include "print/print.h"

namespace rlock {

// This host's clock, to the millisecond.
WallTime now_wall();

// TEXT in the colour ANSI (an SGR code, "31" red ...) when STYLE has colours.
std::string paint(const OutputStyle& style, const char* ansi, const std::string& text);

// A time of the server's clock (ms since the epoch) in RFC 3339.
std::string server_time_text(int64_t ms);

// "ttl 28.4s", or "no ttl" for PTTL < 0.
std::string ttl_text(Millis pttl);

// "web-2 pid 4121 (report.sh)"
std::string holder_text(const Holder& h);
// "last output 2m ago" of a holder whose run keeps its output and has printed, else "".
std::string last_output_text(const HolderView& h);

// "the lock expires in 28.1s", "its place never expires" (WHAT: "its place").
std::string expiry_text(Millis pttl, const std::string& what = "the lock");

// What an operator at 3 a.m. needs to know of a holder on this host whose pid is gone: whether
// the lock (or its place: WHAT) is left over, staying until its ttl runs out, or still in use
// by the process group it is held for (its keeper renews it: waiting for the ttl would be in
// vain); or, of a holder in another PID namespace on this host, that its pid is not the one
// here. "" otherwise.
std::string gone_text(const HolderView& h, Millis pttl, const std::string& what = "the lock");

// A tombstone H with TTL left: "web-2 pid 4121 (report.sh) was broken by alice@ops-1 3s ago;
// free once it has stopped, in 8.2s at the latest".
std::string broken_text(const HolderView& h, Millis ttl);
// The same, as a holder is named where a lock's holder is ("busy, held by ..."):
// "web-2 pid 4121 (report.sh), broken by alice@ops-1 3s ago; free once it has stopped, ...".
std::string broken_holder_text(const HolderView& h, Millis ttl);

// "exit 0", "exit 3", "signalled (143)", "lost (76)", "busy (75)" ...
std::string result_text(const RunRecord& r);
// "alice@ops-1: the database is back": who did the operator's action R, and why.
std::string action_by(const RunRecord& r);

// "exit 0 on web-2, 3h ago": R, which ended AGO.
std::string last_run_text(const RunRecord& r, Millis ago);

// "free", "held", "broken", "not a lock (hash)", coloured by STYLE.
std::string state_word(const LockView& v, const OutputStyle& style);
// The part of a status line after the key and the state word: "by web-1 pid 21877
// (report.sh)  for 3m12s  ttl 28.4s ..."; "" for a free lock and a key of another type.
std::string lock_details(const LockView& v);
// "1200 more waiters or places not shown ...": what the bound on reads left out, or "".
std::string not_shown_text(const LockView& v);
// Redlock: "on 3 of 5 nodes; held on 2 by web-1 pid 21877 ..., not a quorum; no answer from
// 10.0.0.5:6379" when the nodes do not all say what the state shows; "" when they do.
std::string nodes_text(const LockView& v);
// The state word and the details after it (a tombstone's after a colon: "broken: web-1 pid
// 21877 (report.sh) was broken by alice@ops-1 3s ago; free once ...").
std::string state_text(const LockView& v, const OutputStyle& style);

// "default", "file", "environment", "flag": where a setting's value came from.
const char* origin_name(Origin::Kind kind);

// ROWS as lines "LABEL  VALUE", each value starting at column WIDTH (a label of WIDTH
// characters or more is followed by one space).
std::string labelled_rows(const std::vector<std::pair<std::string, std::string>>& rows,
                          size_t width);

}  // namespace rlock
