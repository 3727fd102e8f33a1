-- uses: common.lua
-- Sets our lock's expiry to TTL from now: 1, or 0 when it is not ours.
-- Compare-then-PEXPIRE in one step: between a client's GET and PEXPIRE our lock could expire
-- and be taken by another holder, whose lock we would then extend.
-- A lock in use keeps its fence counter RETENTION ms more (0: as it is), so that a lock held
-- longer than --retention still has it (list finds locks by their counters).
-- With PHASES (KEYS[3]) and ARGV from 4 on, the run's phase rides along (keep_phase), written
-- only once the lock is found ours, with the lock's own ttl.
local lock, fence_key, phases = KEYS[1], KEYS[2], KEYS[3]
local owner_prefix, ttl, retention = ARGV[1], ARGV[2], tonumber(ARGV[3])

local v = redis.pcall('GET', lock)
if type(v) == 'string' and string.sub(v, 1, #owner_prefix) == owner_prefix then
  if retention > 0 and redis.call('PTTL', fence_key) >= 0 then
    redis.call('PEXPIRE', fence_key, retention)
  end
  local renewed = redis.call('PEXPIRE', lock, ttl)
  if phases then
    redis.call('PEXPIRE', phases, ttl)  -- dies with the lock, not a moment later
    keep_phase(phases, string.sub(owner_prefix, 9, -2), ARGV, 4, tonumber(ttl), now_ms())
  end
  return renewed
end
return 0
