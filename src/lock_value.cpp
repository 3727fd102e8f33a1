#include "lock_value.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "error.h"
#include "fd.h"
#include "proc_stat.h"
#include "text.h"

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
  if (v.fence) out += " fence=" + std::to_string(*v.fence);
  return out;
}

std::optional<LockValue> decode_lock_value(std::string_view text) {
  if (text.substr(0, k_value_magic.size()) != k_value_magic) return std::nullopt;
  text.remove_prefix(k_value_magic.size());
  LockValue v;
  size_t sp = text.find(' ');
  v.token = std::string(text.substr(0, sp));
  if (!is_token(v.token)) return std::nullopt;
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
    } else if (name == "pstart") {
      auto n = parse_i64(*value);
      if (!n) return std::nullopt;
      v.holder.start_ticks = *n;
    } else if (name == "pid") {
      auto n = parse_i64(*value);
      if (!n) return std::nullopt;
      v.holder.pid = *n;
    } else if (name == "fence") {
      auto n = parse_i64(*value);
      if (!n) return std::nullopt;
      v.fence = *n;
    } else if (name == "since") {
      auto t = parse_rfc3339(*value);
      if (!t) return std::nullopt;
      v.holder.since = *t;
    }
    // Unknown fields are skipped: a newer rlock may add some, and older ones still read the rest.
  }
  return v;
}

namespace {

// Takes TEXT's first line off it and returns the line, without its newline.
std::string_view take_line(std::string_view& text) {
  size_t eol = text.find('\n');
  std::string_view line = text.substr(0, eol);
  text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
  return line;
}

}  // namespace

std::optional<bool> passwd_files_first(std::string_view nsswitch) {
  while (!nsswitch.empty()) {
    std::string_view line = take_line(nsswitch);
    line = line.substr(0, line.find('#'));
    size_t start = line.find_first_not_of(" \t");
    if (start == std::string_view::npos || line.substr(start, 7) != "passwd:") continue;
    line = line.substr(start + 7);
    start = line.find_first_not_of(" \t");
    if (start == std::string_view::npos) return std::nullopt;
    line = line.substr(start);
    return line.substr(0, line.find_first_of(" \t[")) == "files";
  }
  return std::nullopt;
}

std::optional<std::string> name_in_passwd(std::string_view passwd, uid_t uid) {
  std::string uid_text = std::to_string(uid);
  while (!passwd.empty()) {
    std::string_view line = take_line(passwd);
    // name:password:uid:...; compat entries (+name, -name) are getpwuid's to interpret.
    if (line.empty() || line[0] == '+' || line[0] == '-') continue;
    size_t name_end = line.find(':');
    if (name_end == 0 || name_end == std::string_view::npos) continue;
    size_t uid_start = line.find(':', name_end + 1);
    if (uid_start == std::string_view::npos) continue;
    std::string_view uid_field = line.substr(uid_start + 1);
    if (uid_field.substr(0, uid_field.find(':')) == uid_text)
      return std::string(line.substr(0, name_end));
  }
  return std::nullopt;
}

namespace {

// The text of a small system file, read with plain system calls (no stdio); nothing when it
// is missing, unreadable, or larger than LIMIT.
std::optional<std::string> small_file(const char* path, size_t limit) {
  Fd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return std::nullopt;
  std::string text;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || text.size() + static_cast<size_t>(n) > limit) return std::nullopt;
    if (n == 0) return text;
    text.append(buf, static_cast<size_t>(n));
  }
}

// UID's user name as getpwuid(3) gives it. Where nsswitch.conf asks /etc/passwd first (nearly
// everywhere), rlock reads that file itself: glibc's NSS start-up (nsswitch.conf, two tries at
// nscd, then the same file) cost 80 µs of every run, a twentieth of rlock's overhead (A/B on
// loopback). Anything else, and a uid not in the file (LDAP, sssd, systemd's dynamic users),
// goes through getpwuid_r.
std::string user_name(uid_t uid) {
  auto nsswitch = small_file("/etc/nsswitch.conf", 64 * 1024);
  if (nsswitch && passwd_files_first(*nsswitch).value_or(false)) {
    auto passwd = small_file("/etc/passwd", 1024 * 1024);
    if (passwd)
      if (auto name = name_in_passwd(*passwd, uid)) return *name;
  }
  // getpwuid_r: the renewal thread may be running, and getpwuid's static buffer is not ours.
  std::vector<char> buf(1024);  // grown when an entry needs it
  passwd pw{};
  passwd* found = nullptr;
  int err;
  while ((err = ::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found)) == ERANGE &&
         buf.size() < (1u << 20))
    buf.resize(buf.size() * 2);
  return err == 0 && found ? found->pw_name : std::to_string(uid);
}

}  // namespace

namespace {

std::string this_host() {
  if (const char* name = std::getenv("RLOCK_HOSTNAME"); name && *name) return name;
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) == 0 && buf[0]) return buf;
  return "unknown";
}

// A short form of this boot's id (/proc/sys/kernel/random/boot_id): 48 bits tell two boots
// of one host apart.
std::string this_boot() {
  char buf[64] = {};
  Fd fd(::open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC));
  ssize_t n = fd.valid() ? ::read(fd.get(), buf, sizeof buf - 1) : -1;
  std::string out;
  for (ssize_t i = 0; i < n && out.size() < 12; ++i)
    if (hex_digit_value(buf[i]) >= 0) out += buf[i];
  return out.size() == 12 ? out : "";
}

}  // namespace

std::optional<bool> holder_alive(const Holder& h) {
  if (h.boot.empty() || h.start_ticks <= 0 || h.pid <= 0) return std::nullopt;
  if (h.host != this_host() || h.boot != this_boot()) return std::nullopt;
  auto st = read_proc_stat(h.pid);
  return st && st->start_ticks == h.start_ticks && !has_exited(st->state);
}

Holder current_holder(std::string_view cmd) {
  Holder h;
  h.host = this_host();
  h.boot = this_boot();
  h.pid = ::getpid();
  if (auto st = read_proc_stat(h.pid)) h.start_ticks = st->start_ticks;
  h.user = user_name(::geteuid());
  h.since =
      std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now());
  size_t slash = cmd.rfind('/');
  h.cmd = std::string(slash == std::string_view::npos ? cmd : cmd.substr(slash + 1));
  return h;
}

Holder parent_holder() {
  pid_t parent = ::getppid();
  std::string comm;
  if (FILE* f = std::fopen(("/proc/" + std::to_string(parent) + "/comm").c_str(), "r")) {
    char buf[64] = {};
    if (std::fgets(buf, sizeof buf, f)) comm = buf;
    std::fclose(f);
  }
  while (!comm.empty() && (comm.back() == '\n' || comm.back() == '\r')) comm.pop_back();
  Holder h = current_holder(comm.empty() ? "rlock-acquire" : comm);
  h.pid = parent;
  auto st = read_proc_stat(parent);
  h.start_ticks = st ? st->start_ticks : 0;
  return h;
}

std::string format_rfc3339(WallTime t) {
  // Calendar arithmetic, not gmtime_r: glibc's reads /etc/localtime first (tzset), on every
  // run's way to its first Redis command.
  using namespace std::chrono;
  sys_days day = floor<days>(t);
  year_month_day ymd(day);
  hh_mm_ss<milliseconds> time(t - day);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02d.%03dZ", int(ymd.year()),
                unsigned(ymd.month()), unsigned(ymd.day()), int(time.hours().count()),
                int(time.minutes().count()), int(time.seconds().count()),
                int(time.subseconds().count()));
  return buf;
}

std::optional<WallTime> parse_rfc3339(std::string_view text) {
  // Exactly the form format_rfc3339 writes: YYYY-MM-DDTHH:MM:SS.mmmZ
  if (text.size() != 24 || text[4] != '-' || text[7] != '-' || text[10] != 'T' || text[13] != ':' ||
      text[16] != ':' || text[19] != '.' || text[23] != 'Z')
    return std::nullopt;
  auto num = [&](size_t pos, size_t len) { return parse_i64(text.substr(pos, len)); };
  auto y = num(0, 4), mo = num(5, 2), d = num(8, 2), h = num(11, 2), mi = num(14, 2),
       s = num(17, 2), ms = num(20, 3);
  if (!y || !mo || !d || !h || !mi || !s || !ms) return std::nullopt;
  if (*mo < 1 || *mo > 12 || *d < 1 || *d > 31 || *h > 23 || *mi > 59 || *s > 60)
    return std::nullopt;
  using namespace std::chrono;
  year_month_day ymd{year(static_cast<int>(*y)), month(static_cast<unsigned>(*mo)),
                     day(static_cast<unsigned>(*d))};
  if (!ymd.ok()) return std::nullopt;
  auto t = sys_days(ymd) + hours(*h) + minutes(*mi) + seconds(*s) + milliseconds(*ms);
  return time_point_cast<milliseconds>(t);
}

}  // namespace rlock
