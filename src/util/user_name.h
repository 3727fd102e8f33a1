// The name of a user id, as getpwuid(3) gives it, mostly without loading glibc's NSS: where
// nsswitch.conf asks /etc/passwd first, rlock reads that file itself (user_name.cpp says why).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

namespace rlock {

std::string user_name(uid_t uid);

// Whether the passwd line of an nsswitch.conf text names "files" first; nothing without one.
std::optional<bool> passwd_files_first(std::string_view nsswitch);
// The name of the first /etc/passwd entry (PASSWD, its text) with UID, as glibc's files
// service finds it; compat entries (+, -) are skipped.
std::optional<std::string> name_in_passwd(std::string_view passwd, uid_t uid);

}  // namespace rlock
