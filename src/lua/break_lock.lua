-- uses: common.lua
-- release --force: deletes the lock whoever holds it (a string only) and wakes the first
-- waiter. Returns {type} for a key that is not a lock (left alone), else {type, value, pttl}.
-- Reading and deleting are one step, so the value reported is exactly the one deleted.
local lock, queue, alive = KEYS[1], KEYS[2], KEYS[3]
local wake_prefix = ARGV[1]

local t = redis.call('TYPE', lock)['ok']
if t ~= 'string' then return {t} end
local v = redis.call('GET', lock)
local pttl = redis.call('PTTL', lock)
redis.call('DEL', lock)
wake_first(queue, alive, wake_prefix, now_ms())
return {t, v, pttl}
