#include "util/file_access.h"

#include <unistd.h>

#include <cstdio>

namespace rlock {

namespace {

std::string mode_text(const struct stat& st) {
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  return std::string("mode ") + mode;
}

// Whether UID is neither root nor this process's effective user.
bool someone_else(uid_t uid) { return uid != 0 && uid != ::geteuid(); }

// Why others can change what is in DIR, the file's directory; empty when they cannot. With the
// sticky bit (/tmp) only a file's owner and the directory's may rename or remove the file.
std::string directory_changed_by_others(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return "";
  if (someone_else(st.st_uid))
    return "its directory " + dir + " is owned by uid " + std::to_string(st.st_uid);
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0)
    return "its directory " + dir + " is " + mode_text(st);
  return "";
}

std::string directory_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

FileAccess file_access(const std::string& path, const struct stat& st) {
  FileAccess out;
  if ((st.st_mode & (S_IRGRP | S_IROTH)) != 0) out.read_by_others = mode_text(st);
  if (someone_else(st.st_uid))
    out.changed_by_others = "owned by uid " + std::to_string(st.st_uid);
  else if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    out.changed_by_others = mode_text(st);
  else
    out.changed_by_others = directory_changed_by_others(directory_of(path));
  return out;
}

}  // namespace rlock
