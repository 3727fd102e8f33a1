-- Sets our lock's expiry to TTL from now: 1, or 0 when it is not ours.
-- Compare-then-PEXPIRE in one step: between a client's GET and PEXPIRE our lock could expire
-- and be taken by another holder, whose lock we would then extend.
local lock = KEYS[1]
local owner_prefix, ttl = ARGV[1], ARGV[2]

local v = redis.pcall('GET', lock)
if type(v) == 'string' and string.sub(v, 1, #owner_prefix) == owner_prefix then
  return redis.call('PEXPIRE', lock, ttl)
end
return 0
