#include "util/trusted_file.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "util/error.h"
#include "util/text.h"
#include "util/user_name.h"

namespace rlock {

namespace {

// Root, and the user rlock runs as: nobody else may own what rlock writes or passes through.
bool trusted_owner(uid_t uid) { return uid == 0 || uid == ::geteuid(); }

// "mode 0644", "mode 1777".
std::string mode_text(const struct stat& st) {
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  return std::string("mode ") + mode;
}

// Why another user could swap the files in the directory ST (PATH), or "".
std::string untrusted_dir(const struct stat& st, const std::string& path) {
  if (!trusted_owner(st.st_uid))
    return path + " belongs to " + user_name(st.st_uid) + ", who could swap what is in it";
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
    return path + " is " + mode_text(st) +
           " without the sticky bit: another user could swap what is in it";
  return "";
}

// A fresh name for a file beside NAME, that no reader of NAME (node_exporter reads *.prom)
// mistakes for it.
std::string fresh_name(std::string_view name) {
  unsigned char bytes[6];
  if (::getrandom(bytes, sizeof bytes, 0) != sizeof bytes)
    throw Error(k_exit_internal, errno_message("getrandom"));
  std::string out = "." + std::string(name) + ".";
  for (unsigned char b : bytes) append_hex(out, b);
  return out;
}

}  // namespace

std::string base_name(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The directory is walked one component at a time from / (or the working directory), so that
// each link on the way is judged by its owner before it is followed, and each directory by
// who may write it.
TrustedDir TrustedDir::open(const std::string& path) {
  TrustedDir dir;
  size_t slash = path.rfind('/');
  dir.path_ = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  dir.fd_.reset(::open(dir.path_.starts_with('/') ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
  std::string walked = dir.path_.starts_with('/') ? "" : ".";
  for (size_t at = 0; dir.fd_.valid() && at <= dir.path_.size();) {
    size_t end = std::min(dir.path_.find('/', at), dir.path_.size());
    std::string part = dir.path_.substr(at, end - at);
    at = end + 1;
    struct stat st {};
    if (::fstat(dir.fd_.get(), &st) != 0) break;
    if (std::string why = untrusted_dir(st, walked.empty() ? "/" : walked); !why.empty()) {
      // Every directory on the way counts: whoever may rename one may swap what is below.
      dir.problem_ = why;
      return dir;
    }
    if (part.empty() || part == ".") continue;
    walked += "/" + part;
    // The component itself, not what it may point to: a link is judged by its owner before
    // it is followed, and what is opened is what was judged.
    Fd next(::openat(dir.fd_.get(), part.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (next.valid() && ::fstat(next.get(), &st) == 0 && S_ISLNK(st.st_mode)) {
      if (!trusted_owner(st.st_uid)) {
        dir.problem_ = walked + " is a link that " + user_name(st.st_uid) +
                       " owns: not followed (it could point anywhere)";
        return dir;
      }
      // Root's or this user's, in a directory no other user can change: followed.
      next.reset(::openat(dir.fd_.get(), part.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    }
    dir.fd_ = std::move(next);
  }
  struct stat st {};
  if (!dir.fd_.valid() || ::fstat(dir.fd_.get(), &st) != 0)
    dir.problem_ = errno_message("open " + dir.path_);
  else if (!S_ISDIR(st.st_mode))
    dir.problem_ = errno_message("open " + dir.path_, ENOTDIR);
  else
    dir.problem_ = untrusted_dir(st, dir.path_);
  return dir;
}

Fd TrustedDir::open_file(std::string_view name, int flags, std::string& problem) const {
  std::string shown = path_of(name);
  Fd fd(::openat(fd_.get(), std::string(name).c_str(),
                 flags | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0644));
  struct stat st {};
  if (!fd.valid()) {
    // The kernel refuses some of these itself (protected_symlinks, protected_regular in a
    // sticky directory): said as what they are, not as the bare EACCES.
    int err = errno;
    if (err == ENOENT && !(flags & O_CREAT)) return Fd();
    if (::fstatat(fd_.get(), std::string(name).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        (S_ISLNK(st.st_mode) || !trusted_owner(st.st_uid)))
      problem = S_ISLNK(st.st_mode)
                    ? shown + " is a link: not followed (another user may have made it)"
                    : shown + " belongs to " + user_name(st.st_uid) + ", not to " +
                          user_name(::geteuid());
    else
      problem = errno_message("open " + shown, err);
  } else if (::fstat(fd.get(), &st) != 0) {
    problem = errno_message("fstat " + shown);
  } else if (!S_ISREG(st.st_mode)) {
    problem = shown + " is not a regular file";
  } else if (!trusted_owner(st.st_uid)) {
    problem = shown + " belongs to " + user_name(st.st_uid) + ", not to " + user_name(::geteuid());
  } else if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    problem = shown + " can be written by others (" + mode_text(st) + ")";
  } else if (st.st_nlink > 1) {
    // A second name may be another user's hard link to a file rlock must not touch.
    problem = shown + " has " + std::to_string(st.st_nlink) + " names (hard links)";
  } else {
    return fd;
  }
  return Fd();
}

std::optional<std::string> TrustedDir::replace(std::string_view name, std::string_view text) const {
  std::string temporary;
  Fd fd;
  for (int tries = 0; !fd.valid() && tries < 10; ++tries) {
    temporary = fresh_name(name);
    fd.reset(::openat(fd_.get(), temporary.c_str(),
                      O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!fd.valid() && errno != EEXIST) break;
  }
  if (!fd.valid()) return errno_message("open " + path_of(temporary));
  std::optional<std::string> problem;
  if (!write_all(fd.get(), text.data(), text.size()))
    problem = errno_message("write " + path_of(temporary));
  else if (::renameat(fd_.get(), temporary.c_str(), fd_.get(), std::string(name).c_str()) != 0)
    problem = errno_message("rename to " + path_of(name));
  if (problem) ::unlinkat(fd_.get(), temporary.c_str(), 0);
  return problem;
}

FileAccess file_access(const std::string& path, const struct stat& st) {
  FileAccess out;
  if ((st.st_mode & (S_IRGRP | S_IROTH)) != 0) out.read_by_others = mode_text(st);
  if (!trusted_owner(st.st_uid))
    out.changed_by_others = "owned by " + user_name(st.st_uid);
  else if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    out.changed_by_others = mode_text(st);
  else
    out.changed_by_others = TrustedDir::open(path).problem();
  return out;
}

}  // namespace rlock
