#include "util/user_name.h"

#include <pwd.h>

#include <cerrno>
#include <vector>

#include "util/fd.h"

namespace rlock {

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

// UID's user name as getpwuid(3) gives it. Where nsswitch.conf asks /etc/passwd first (nearly
// everywhere), rlock reads that file itself: glibc's NSS start-up (nsswitch.conf, two tries at
// nscd, then the same file) cost 55-62 µs of every run, 4% of what rlock adds (bench/ab.py,
// docs/PERFORMANCE.md). Anything else, and a uid not in the file (LDAP, sssd, systemd's dynamic
// users), goes through getpwuid_r.
std::string user_name(uid_t uid) {
  auto nsswitch = read_small_file("/etc/nsswitch.conf", 64 * 1024);
  if (nsswitch && passwd_files_first(*nsswitch).value_or(false)) {
    auto passwd = read_small_file("/etc/passwd", 1024 * 1024);
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

}  // namespace rlock
