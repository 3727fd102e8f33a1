// Who besides its owner and root may read or change a file: one that holds a secret (a
// password file, a config file with `password`) should let nobody else read it, and one that
// names a command rlock runs as its user (`password-command`, `notify`) nobody else change it
// (man page, CONFIGURATION).
#pragma once

#include <sys/stat.h>

#include <string>

namespace rlock {

struct FileAccess {
  // Why others can read the file ("mode 0644"); empty when they cannot.
  std::string read_by_others;
  // Why others can change it ("mode 0666", "owned by uid 1001", "its directory /srv is mode
  // 0777": a directory others can write lets them put another file in its place, unless it has
  // the sticky bit and the file is not theirs); empty when they cannot.
  std::string changed_by_others;
};

// The access to the file PATH, whose status ST is (fstat of the file rlock opened).
FileAccess file_access(const std::string& path, const struct stat& st);

}  // namespace rlock
