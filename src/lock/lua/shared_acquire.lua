-- uses: common.lua, slots.lua, sharing.lua
-- Takes a shared place of the lock (--shared) when nobody holds it alone and no waiter that
-- wants it alone came before us; the answers of acquire.lua: {1, fence}, {-1, type}, or
-- {0, value, pttl, block, sharers} (the value is empty when a waiter ahead keeps us out); taken:
-- {1, fence, now, start}, with the start entry in HISTORY (KEYS[9], ARGV[8] on: common.lua);
-- {2, pause, pttl, block} while PAUSE (KEYS[8]) says nobody takes it.
-- One step closes these races:
--  * an exclusive acquire between our look at the lock key and our ZADD would hold the lock
--    together with us (acquire.lua, in its own step, finds our place and waits);
--  * a waiter that wants the lock alone, queued between our look at the queue and our ZADD,
--    would find us in and wait once more: the starvation sharing.lua describes;
--  * a waiter marked as sharing is in the queue and in SHARING at once, so no script sees it
--    queued without knowing what it wants.
-- A place that is already ours (a retry after a lost reply) counts as acquired.
local lock, shared, values, fence_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local queue, alive, sharing, pause, history = KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local value, ttl, token, wake_prefix = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local max_block, fallback, retention = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])

local now, now_us = clock()
prune_waiters(queue, alive, now)
redis.call('ZREMRANGEBYSCORE', sharing, '-inf', now)
local t = redis.call('TYPE', shared)['ok']
if t ~= 'zset' and t ~= 'none' then return {-1, t} end
local v = redis.pcall('GET', lock)
if type(v) == 'table' then return {-1, redis.call('TYPE', lock)['ok']} end
local sharer, expiry, sharers = last_sharer(shared, values, now)

-- Waits (when MAX_BLOCK > 0) BLOCK ms at most, as a waiter that shares.
local function wait_as_sharer(answer, block)
  if max_block > 0 then
    answer[4] = math.max(1, math.min(block, max_block))
    enqueue(queue, alive, token, now, answer[4])
    redis.call('ZADD', sharing, now + answer[4] + 1500, token)
    redis.call('PEXPIRE', sharing, redis.call('PTTL', queue))
  end
  answer[5] = sharers or 0
  return answer
end

if redis.call('ZSCORE', shared, token) then
  redis.call('ZADD', shared, 'XX', now + ttl, token)
  keep_semaphore(shared, values, now)
  dequeue(queue, alive, wake_prefix, token)
  redis.call('ZREM', sharing, token)
  local held = redis.call('HGET', values, token) or ''
  local fence = tonumber(string.match(held, ' fence=(%d+)$') or '0')
  return {1, fence, now, started_entry(history, ARGV, 8, fence)}
end
if v then
  -- Held alone (or a tombstone of release --force, or another program's lock).
  local pttl = redis.call('PTTL', lock)
  return wait_as_sharer({0, v, pttl, 0}, block_for(v, pttl, max_block, fallback))
end
-- Nobody holds it alone: a pause keeps it free, and a waiter queues as one that shares.
local p = redis.call('GET', pause)
if p then
  local pttl = redis.call('PTTL', pause)
  return wait_as_sharer({2, p, pttl, 0}, pttl + 1)
end
local ahead = exclusive_waiter_ahead(queue, sharing, redis.call('ZRANK', queue, token))
if ahead then
  -- It wakes us when it releases; look again when its place lapses, should it have died (an
  -- exclusive waiter renews its place every 500 ms while the lock is shared: acquire.lua).
  local place = math.max(0, tonumber(redis.call('ZSCORE', alive, ahead) or now) - now)
  return wait_as_sharer({0, '', place, 0}, place + 1)
end
local fence = next_fence(fence_key, retention, now_us)
redis.call('ZADD', shared, now + ttl, token)
redis.call('HSET', values, token, taken_at(value, now) .. ' fence=' .. fence_text(fence))
keep_semaphore(shared, values, now)
dequeue(queue, alive, wake_prefix, token)
redis.call('ZREM', sharing, token)
wake_next_sharer(queue, alive, sharing, wake_prefix, now)
return {1, fence, now, record_start(history, ARGV, 8, fence, now)}
