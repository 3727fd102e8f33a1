// Who else may read or change a file rlock reads (a password file, a config file), and the
// files rlock writes. Those it creates or rewrites for the job (the metrics textfile, the
// heartbeat file) may live in a directory that other users can write too: /var/tmp, a textfile
// directory shared by a team. There another user could plant a link or a file of their own under
// the name rlock will write, and make a run as root overwrite /etc/x, or keep a hung job "alive".
// So these files are opened relative to their directory, never through a link, and refused (with a
// message that says why) where another user could swap them (docs/SECURITY.md):
//   - a link on the way to the directory that another user owns (root's links are followed);
//   - a directory that another user owns (root may), or that others can write and that has no
//     sticky bit (with it, as in /tmp, nobody but its owner can remove or rename a file);
//   - a file that is a link, is not a regular file, belongs to another user (root's may be
//     used), that others (its group too) can write, or that has a second name (a hard link).
// "Others" is anyone but this process's effective user (and root): the group's write bit
// counts, as the group may hold other users.
#pragma once

#include <sys/stat.h>

#include <optional>
#include <string>
#include <string_view>

#include "util/fd.h"

namespace rlock {

// The directory of a file rlock writes, once it is known that no other user can swap what is
// in it.
class TrustedDir {
public:
  // The directory of PATH (a file's path), opened; or why it cannot be trusted, naming it.
  static TrustedDir open(const std::string& path);
  // Why the directory cannot be trusted (empty when it can).
  const std::string& problem() const { return problem_; }

  // The file NAME in it, opened with FLAGS (O_NOFOLLOW and O_CLOEXEC added; with O_CREAT it
  // is made 0644) and checked as above; or why not, in PROBLEM. ENOENT without O_CREAT is
  // an invalid Fd and no problem.
  Fd open_file(std::string_view name, int flags, std::string& problem) const;
  // Replaces the file NAME with TEXT: written to a new file beside it (a fresh name, O_EXCL)
  // and renamed over it, so a reader sees the old or the new text and a link planted under
  // NAME is replaced, never followed. A message when it could not (NAME is then unchanged).
  std::optional<std::string> replace(std::string_view name, std::string_view text) const;

  // The path of NAME in it, for messages.
  std::string path_of(std::string_view name) const { return path_ + "/" + std::string(name); }

private:
  Fd fd_;
  std::string path_;  // as given, for messages
  std::string problem_;
};

// Who besides its owner and root may read or change a file: one that holds a secret (a
// password file, a config file with `password`) should let nobody else read it, and one that
// names a command rlock runs as its user (`password-command`, `notify`) nobody else change it
// (rlock.toml(5)).
struct FileAccess {
  // Why others can read the file ("mode 0644"); empty when they cannot.
  std::string read_by_others;
  // Why others can change it ("mode 0666", "owned by nobody", or why its directory is not
  // trusted, as TrustedDir says: another user could put another file in its place); empty
  // when they cannot.
  std::string changed_by_others;
};

// The access to the file PATH, whose status ST is (fstat of the file rlock opened).
FileAccess file_access(const std::string& path, const struct stat& st);

// The last component of PATH (a file's name).
std::string base_name(const std::string& path);

}  // namespace rlock
