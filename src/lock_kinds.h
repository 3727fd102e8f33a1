// The kinds of lock behind Lock (lock.h), for make_lock() and the files that implement them:
// lock_mutex.cpp, lock_semaphore.cpp, lock_shared.cpp, lock_quorum.cpp. Nothing else includes
// this.
#pragma once

#include <memory>

#include "lock.h"

namespace rlock {

// One key holding the holder's value: the plain lock.
std::unique_ptr<Lock> make_mutex_lock(Redis& redis, std::string key, std::string token,
                                      LockMode mode);
// Up to MODE.limit holders at once, each a slot of a sorted set (--limit).
std::unique_ptr<Lock> make_semaphore_lock(Redis& redis, std::string key, std::string token,
                                          LockMode mode);
// One of any number of shared holders (--shared), which keep the mutex's holder out.
std::unique_ptr<Lock> make_shared_lock(Redis& redis, std::string key, std::string token,
                                       LockMode mode);
// The mutex on each of REDIS's independent nodes, believed by quorum (Redlock).
std::unique_ptr<Lock> make_quorum_lock(Redis& redis, std::string key, std::string token,
                                       LockMode mode);

// 1 as true, 0 as false, anything else a protocol failure naming WHAT.
Result<bool> integer_result(Result<Reply> reply, const char* what);

}  // namespace rlock
