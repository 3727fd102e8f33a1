// The kinds of lock behind Lock (lock.h), for make_lock() and the files that implement them:
// lock_mutex.cpp, lock_semaphore.cpp, lock_shared.cpp, lock_quorum.cpp. Nothing else includes
// this.
#pragma once

#include <memory>

#include "lock/lock.h"

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

// A holder of one place among several (a semaphore's slot, a shared holder's place): a member
// of a sorted set of places (token -> expiry, server ms), its value in a hash beside it. A
// place renews, and says whether it is held, by the same scripts whatever it is a place of
// (lock_semaphore.cpp); taking and giving one back is each kind's own.
class PlaceLock : public Lock {
public:
  Result<bool> renew(Millis ttl, TimePoint deadline, const PhaseUpdate& phase) override;
  Result<bool> holds(TimePoint deadline) override;

protected:
  // PLACES and VALUES: the helper keys' kinds ("sem" and "holders" ...).
  PlaceLock(Redis& redis, std::string key, std::string token, LockMode mode,
            std::string_view places, std::string_view values)
      : Lock(redis, std::move(key), std::move(token), mode),
        places_key_(helper_key(key_, places)), values_key_(helper_key(key_, values)) {}

  const std::string places_key_, values_key_;
};

// 1 as true, 0 as false, anything else a protocol failure naming WHAT.
Result<bool> integer_result(Result<Reply> reply, const char* what);

}  // namespace rlock
