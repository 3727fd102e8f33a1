// How `rlock release --token T` tells the detached keeper of `acquire --while-pid` that the
// script gave its lock back, so that the keeper exits quietly instead of taking the release
// for a loss. An abstract unix socket (nothing to clean up in the file system) on this host,
// named after a hash of the token: /proc/net/unix shows the names to every local user, and
// the token is what releases the lock. Only the keeper's own user, or root, may tell it.
#pragma once

#include <string>

#include "util/duration.h"
#include "util/fd.h"

namespace rlock {

// The keeper's end: a listening socket, readable when someone tells it. Invalid (and nothing
// lost but the quiet exit) when it cannot be made.
Fd listen_for_release(const std::string& token);

// For the keeper, LISTENING readable: the connection of one allowed to tell it (same user, or
// root) about ITS lock, KEY; the keeper stops renewing, then acknowledge()s on it. Invalid for
// anyone else, or another key (a release of a mistyped key must not stop the keeper).
Fd stop_request(int listening, const std::string& key);
void acknowledge(const Fd& request);

// The releasing end: tells the keeper of TOKEN and KEY on this host, if there is one, and waits
// up to TIMEOUT for it to stop renewing. False when there was no keeper (or it did not answer).
bool tell_keeper(const std::string& token, const std::string& key, Millis timeout);

}  // namespace rlock
