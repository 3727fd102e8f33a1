-- Sets our lock's expiry to TTL from now: 1, or 0 when it is not ours.
-- Compare-then-PEXPIRE in one step: between a client's GET and PEXPIRE our lock could expire
-- and be taken by another holder, whose lock we would then extend.
-- A lock in use keeps its fence counter RETENTION ms more (0: as it is), so that a lock held
-- longer than --retention still has it (list finds locks by their counters).
local lock, fence_key = KEYS[1], KEYS[2]
local owner_prefix, ttl, retention = ARGV[1], ARGV[2], tonumber(ARGV[3])

local v = redis.pcall('GET', lock)
if type(v) == 'string' and string.sub(v, 1, #owner_prefix) == owner_prefix then
  if retention > 0 and redis.call('PTTL', fence_key) >= 0 then
    redis.call('PEXPIRE', fence_key, retention)
  end
  return redis.call('PEXPIRE', lock, ttl)
end
return 0
