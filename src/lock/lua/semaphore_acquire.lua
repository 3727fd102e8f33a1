-- uses: common.lua, slots.lua
-- Takes a slot of the semaphore if one is free (and, with --fair, it is our turn): the answers
-- of acquire.lua (with its start entry in HISTORY, KEYS[7], ARGV[10] on; PAUSE KEYS[6], looked
-- at when a place is free). Busy names the holder whose slot frees first.
local sem, holders, fence_key, queue, alive = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local pause, history = KEYS[6], KEYS[7]
local value, ttl, token, wake_prefix = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local fair, max_block, fallback = ARGV[5] == '1', tonumber(ARGV[6]), tonumber(ARGV[7])
local limit, retention = tonumber(ARGV[8]), tonumber(ARGV[9])

local now, now_us = clock()
prune_waiters(queue, alive, now)
expire_holders(sem, holders, now)
if redis.call('TYPE', sem)['ok'] ~= 'zset' and redis.call('EXISTS', sem) == 1 then
  return {-1, redis.call('TYPE', sem)['ok']}
end
if redis.call('ZSCORE', sem, token) then
  redis.call('ZADD', sem, 'XX', now + ttl, token)
  keep_semaphore(sem, holders, now)
  dequeue(queue, alive, wake_prefix, token)
  local v = redis.call('HGET', holders, token) or ''
  local fence = tonumber(string.match(v, ' fence=(%d+)$') or '0')
  return {1, fence, now, started_entry(history, ARGV, 10, fence)}
end
local free = limit - redis.call('ZCARD', sem)
if free > 0 then
  local stop = paused(pause, queue, alive, token, now, max_block)
  if stop then return stop end
end
local turn = free > 0
if turn and fair then
  -- In arrival order: the first FREE waiters may take a slot, a newcomer only past them all.
  local rank = redis.call('ZRANK', queue, token)
  if rank then turn = rank < free else turn = redis.call('ZCARD', queue) < free end
end
if turn then
  local fence = next_fence(fence_key, retention, now_us)
  redis.call('ZADD', sem, now + ttl, token)
  redis.call('HSET', holders, token, taken_at(value, now) .. ' fence=' .. fence_text(fence))
  keep_semaphore(sem, holders, now)
  dequeue(queue, alive, wake_prefix, token)
  return {1, fence, now, record_start(history, ARGV, 10, fence, now)}
end
local v, pttl = false, -2
local first = redis.call('ZRANGE', sem, 0, 0, 'WITHSCORES')
if first[1] then
  v = redis.call('HGET', holders, first[1])
  pttl = math.max(0, tonumber(first[2]) - now)
end
return busy(queue, alive, token, now, v, pttl, max_block, fallback)
