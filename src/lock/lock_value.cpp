#include "lock/lock_value.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <limits>
#include <vector>

#include "util/error.h"
#include "util/fd.h"
#include "util/proc_stat.h"
#include "util/text.h"
#include "util/user_name.h"

namespace rlock {

namespace {

// Field values are percent-escaped where they would break the line apart: space, control bytes,
// '%' and '='. UTF-8 passes through.
std::string escape(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c <= 0x20 || c == 0x7f || c == '%' || c == '=') {
      out += '%';
      append_hex(out, c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::optional<int64_t> parse_i64(std::string_view s) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

std::string escape_field(std::string_view s) { return escape(s); }

std::string make_token() {
  unsigned char bytes[k_token_bytes];
  size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(k_exit_internal, errno_message("getrandom"));
    got += static_cast<size_t>(n);
  }
  std::string token;
  for (unsigned char c : bytes) append_hex(token, c);
  return token;
}

bool is_token(std::string_view s) {
  if (s.size() != 2 * k_token_bytes) return false;
  for (char c : s)
    if (hex_digit_value(c) < 0 || (c >= 'A' && c <= 'F')) return false;
  return true;
}

std::string owner_prefix(std::string_view token) {
  return std::string(k_value_magic) + std::string(token) + " ";
}

std::string encode_lock_value(const LockValue& v) {
  std::string out = owner_prefix(v.token);
  out += "host=" + escape(v.holder.host);
  out += " pid=" + std::to_string(v.holder.pid);
  out += " user=" + escape(v.holder.user);
  out += " since=" + format_rfc3339(v.holder.since);
  out += " cmd=" + escape(v.holder.cmd);
  if (!v.holder.boot.empty()) out += " boot=" + escape(v.holder.boot);
  if (v.holder.start_ticks > 0) out += " pstart=" + std::to_string(v.holder.start_ticks);
  if (!v.holder.pidns.empty()) out += " pidns=" + escape(v.holder.pidns);
  if (v.ttl_ms) out += " ttl=" + std::to_string(*v.ttl_ms);
  if (v.holder.group) out += " group=1";
  if (v.fence) out += " fence=" + std::to_string(*v.fence);
  return out;
}

std::optional<LockValue> decode_lock_value(std::string_view text) {
  if (text.substr(0, k_value_magic.size()) != k_value_magic) return std::nullopt;
  LockValue v;
  if (text.starts_with(k_tombstone_magic)) {
    text.remove_prefix(k_tombstone_magic.size());
    v.broken = Breaking{};
  } else {
    text.remove_prefix(k_value_magic.size());
  }
  size_t sp = text.find(' ');
  v.token = std::string(text.substr(0, sp));
  if (v.broken && v.token == "-")
    v.token.clear();  // another program's lock was broken
  else if (!is_token(v.token))
    return std::nullopt;
  text = sp == std::string_view::npos ? std::string_view{} : text.substr(sp + 1);
  while (!text.empty()) {
    sp = text.find(' ');
    std::string_view field = text.substr(0, sp);
    text = sp == std::string_view::npos ? std::string_view{} : text.substr(sp + 1);
    size_t eq = field.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    std::string_view name = field.substr(0, eq);
    auto value = percent_decode(field.substr(eq + 1));
    if (!value) return std::nullopt;
    if (name == "host") {
      v.holder.host = *value;
    } else if (name == "user") {
      v.holder.user = *value;
    } else if (name == "cmd") {
      v.holder.cmd = *value;
    } else if (name == "boot") {
      v.holder.boot = *value;
    } else if (name == "pidns") {
      v.holder.pidns = *value;
    } else if (name == "pstart") {
      auto n = parse_i64(*value);
      if (!n) return std::nullopt;
      v.holder.start_ticks = *n;
    } else if (name == "group") {
      auto n = parse_i64(*value);
      if (!n) return std::nullopt;
      v.holder.group = *n != 0;
    } else if (name == "pid") {
      auto n = parse_i64(*value);
      if (!n) return std::nullopt;
      v.holder.pid = *n;
    } else if (name == "ttl") {
      auto n = parse_i64(*value);
      if (!n) return std::nullopt;
      v.ttl_ms = *n;
    } else if (name == "fence") {
      auto n = parse_i64(*value);
      if (!n) return std::nullopt;
      v.fence = *n;
    } else if (name == "since") {
      auto t = parse_rfc3339(*value);
      if (!t) return std::nullopt;
      v.holder.since = *t;
    } else if (name == "broken_by" && v.broken) {
      v.broken->by = *value;
    } else if (name == "broken_reason" && v.broken) {
      v.broken->reason = *value;
    } else if (name == "broken_at" && v.broken) {
      auto t = parse_rfc3339(*value);
      if (!t) return std::nullopt;
      v.broken->at = *t;
    }
    // Unknown fields are skipped: a newer rlock may add some, and older ones still read the rest.
  }
  return v;
}

namespace {

// The three below are read once per process: they do not change while it runs, and list
// judges every holder by them (at 50,000 locks, reading them for each took a third of its time).
const std::string& this_host() {
  static const std::string host = [] {
    if (const char* name = std::getenv("RLOCK_HOSTNAME"); name && *name) return std::string(name);
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) == 0 && buf[0]) return std::string(buf);
    return std::string("unknown");
  }();
  return host;
}

// A short form of this boot's id (/proc/sys/kernel/random/boot_id): 48 bits tell two boots
// of one host apart.
const std::string& this_boot() {
  static const std::string boot = [] {
    std::string out;
    for (char c : read_small_file("/proc/sys/kernel/random/boot_id", 64).value_or(""))
      if (out.size() < 12 && hex_digit_value(c) >= 0) out += c;
    return out.size() == 12 ? out : std::string();
  }();
  return boot;
}

// This process's PID namespace: the inode of /proc/self/ns/pid; empty when /proc does not say.
const std::string& this_pidns() {
  static const std::string pidns = [] {
    struct stat st {};
    if (::stat("/proc/self/ns/pid", &st) != 0) return std::string();
    return std::to_string(st.st_ino);
  }();
  return pidns;
}

}  // namespace

Liveness holder_liveness(const Holder& h) {
  if (h.boot.empty() || h.start_ticks <= 0 || h.pid <= 0) return Liveness::unknown;
  if (h.pid > std::numeric_limits<pid_t>::max()) return Liveness::unknown;  // not a pid
  if (h.host != this_host() || h.boot != this_boot()) return Liveness::unknown;
  if (!h.pidns.empty() && h.pidns != this_pidns()) return Liveness::other_pid_namespace;
  auto st = read_proc_stat(h.pid);
  if (st && st->start_ticks == h.start_ticks && !has_exited(st->state)) return Liveness::running;
  // Another process with the pid: it could only get it once the group was gone.
  if (!h.group || (st && st->start_ticks != h.start_ticks)) return Liveness::gone;
  // As the keeper judges it (PidWatch::all_gone): zombies left unreaped do not hold the lock.
  if (::kill(-static_cast<pid_t>(h.pid), 0) != 0 && errno == ESRCH) return Liveness::gone;
  return live_processes_in_group(h.pid) > 0 ? Liveness::group_running : Liveness::gone;
}

std::optional<int64_t> holder_command_pid(const Holder& h) {
  if (holder_liveness(h) != Liveness::running) return std::nullopt;
  std::string task = "/proc/" + std::to_string(h.pid) + "/task/" + std::to_string(h.pid);
  auto children = read_small_file((task + "/children").c_str(), 4096);
  if (!children) return std::nullopt;
  std::optional<int64_t> command;
  bool guarded = false;  // rlock run's: its guardian is a child too
  const char* p = children->c_str();
  for (char* end; *p;) {
    long long child = std::strtoll(p, &end, 10);
    if (end == p) break;
    p = end;
    auto comm = read_small_file(("/proc/" + std::to_string(child) + "/comm").c_str(), 64);
    if (comm && comm->rfind("rlock-guardian", 0) == 0)
      guarded = true;
    else if (!command)
      command = child;
  }
  return guarded ? command : std::nullopt;
}

std::string tombstone_fields(const std::string& reason) {
  Holder me = current_holder("");
  std::string out =
      " broken_by=" + escape(operator_name()) + " broken_at=" + format_rfc3339(me.since);
  return reason.empty() ? out : out + " broken_reason=" + escape(reason);
}

Holder current_holder(std::string_view cmd) {
  Holder h;
  h.host = this_host();
  h.boot = this_boot();
  h.pidns = this_pidns();
  h.pid = ::getpid();
  if (auto st = read_proc_stat(h.pid)) h.start_ticks = st->start_ticks;
  h.user = user_name(::geteuid());
  h.since =
      std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now());
  size_t slash = cmd.rfind('/');
  h.cmd = std::string(slash == std::string_view::npos ? cmd : cmd.substr(slash + 1));
  return h;
}

std::string operator_name() {
  std::string out = user_name(::geteuid()) + "@" + this_host();
  std::replace(out.begin(), out.end(), ' ', '_');
  return out;
}

Holder process_holder(pid_t pid) {
  std::string comm;
  if (FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/comm").c_str(), "r")) {
    char buf[64] = {};
    if (std::fgets(buf, sizeof buf, f)) comm = buf;
    std::fclose(f);
  }
  while (!comm.empty() && (comm.back() == '\n' || comm.back() == '\r')) comm.pop_back();
  Holder h = current_holder(comm.empty() ? "rlock-acquire" : comm);
  h.pid = pid;
  auto st = read_proc_stat(pid);
  h.start_ticks = st ? st->start_ticks : 0;
  return h;
}

}  // namespace rlock
