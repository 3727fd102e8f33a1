// What rlock's own process ran out of, when a system call fails for want of it: descriptors,
// processes or threads, memory. Such a failure is rlock's (exit 125), never Redis being away
// (69), and waiting does not fix it: man/rlock.1 EXIT STATUS.
#pragma once

#include <cerrno>
#include <optional>
#include <string>

#include "util/error.h"

namespace rlock {

// What a failed call was doing, which tells what EAGAIN means.
enum class Call {
  opening,  // a descriptor: socket, pipe2, signalfd, eventfd, open ... (EAGAIN: would block)
  spawning  // a process or a thread: fork, clone, pthread_create (EAGAIN: no more of them)
};

// "out of file descriptors (ulimit -n 4)", "out of processes (ulimit -u 3)", "out of memory":
// what ERR, from a call of kind CALL, says rlock ran out of, with the limit that bound it;
// nothing when ERR says something else (a refused connection, a missing file).
std::optional<std::string> shortage(int err, Call call);

// "DOING: out of file descriptors (ulimit -n 4; socket: Too many open files)" when ERR is a
// shortage, else "DOING: SYSCALL: strerror(ERR)".
std::string system_call_message(const std::string& doing, const std::string& syscall, int err,
                                Call call);

// The Error for SYSCALL failing with ERR while rlock was DOING: exit 125, as system_call_message
// words it.
Error system_call_error(const std::string& doing, const std::string& syscall, int err = errno,
                        Call call = Call::opening);

// The same as a Failure to connect, for a connection's set-up (a socket, the password command):
// Why::out_of_resources when ERR is a shortage, else an ordinary failure to connect.
Failure system_call_failure(const std::string& doing, const std::string& syscall, int err,
                            Call call = Call::opening);

}  // namespace rlock
