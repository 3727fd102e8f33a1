-- uses: common.lua, slots.lua, sharing.lua
-- Takes the (mutex) lock if it is free and, with --fair, it is our turn; else says who holds it
-- and, for a waiter, queues it. Returns {1, fence, now, start}, {0, value, pttl, block} or
-- {-1, type}; or {0, value, pttl, block, sharers} while the lock is shared (--shared:
-- sharing.lua); or {2, pause, pttl, block} while PAUSE (KEYS[7]) says nobody takes a free lock
-- (common.lua).
-- NOW is the server's clock, which the value's since= says too (taken_at); START the ID of the
-- run's start entry in HISTORY (KEYS[8], with ARGV[11] on: record_start), or ''.
-- QUEUED (ARGV[10]) is '1' when an earlier attempt of ours may have queued us: only then is
-- there a place of ours to leave when we take the lock.
-- A lock another holds, asked for without waiting (MAX_BLOCK 0, `run -n`, the herd at :00):
-- its value and PTTL, and nothing else, not even the clock, before the definitions of the used
-- files (cmake/embed_lua.cmake), which cost Redis time at each call.
-- Taking the lock and drawing its fence are one step: no fence number is spent on a failed
-- attempt, and nobody sees the lock without its fence. pcall on GET turns a key of another
-- type into a clean answer instead of a script error. A lock that is already ours (a retry
-- after a lost reply) counts as acquired.
-- Shared holders keep us out, looked at in this same step: between a look at their places and
-- our SET, a shared acquire could take a place (shared_acquire.lua, in its own step, finds our
-- lock and waits).
local lock, fence_key, queue, alive = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local shared, shared_values, pause, history = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local value, ttl, owner_prefix, token = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local wake_prefix, fair = ARGV[5], ARGV[6] == '1'
local max_block, fallback = tonumber(ARGV[7]), tonumber(ARGV[8])
local retention, queued = tonumber(ARGV[9]), ARGV[10] == '1'

local v = redis.pcall('GET', lock)
if type(v) == 'table' then return {-1, redis.call('TYPE', lock)['ok']} end
local ours = v and string.sub(v, 1, #owner_prefix) == owner_prefix
if v and not ours and max_block == 0 then return {0, v, redis.call('PTTL', lock), 0} end
-- (definitions)
local now, now_us = clock()
-- A lock with neither waiters nor sharers, the usual case, costs one EXISTS for both.
local crowded = redis.call('EXISTS', alive, shared) > 0
if crowded then prune_waiters(queue, alive, now) end
if ours then
  redis.call('PEXPIRE', lock, ttl)
  dequeue(queue, alive, wake_prefix, token)
  local fence = tonumber(string.match(v, ' fence=(%d+)$') or '0')
  return {1, fence, now, started_entry(history, ARGV, 11, fence)}
end
if not v then
  local stop = paused(pause, queue, alive, token, now, max_block)
  if stop then return stop end
end
local pttl = -2
local turn = true
if v then
  pttl = redis.call('PTTL', lock)
elseif fair then
  local first = redis.call('ZRANGE', queue, 0, 0)[1]
  turn = first == nil or first == token
  -- Not our turn on a free lock: look again when the first waiter's place lapses, should it
  -- have died, rather than after the fallback.
  if not turn then
    pttl = math.max(0, tonumber(redis.call('ZSCORE', alive, first) or now) - now)
  end
end
if not v and turn and crowded and redis.call('EXISTS', shared) == 1 then
  local sharer, expiry, sharers = last_sharer(shared, shared_values, now)
  if sharer then
    -- The last shared release wakes us. Meanwhile our place in the queue keeps shared
    -- newcomers out (sharing.lua), so look again every 500 ms (--fair's refresh, k_fair_refresh)
    -- to renew it: were we to die, they would be held up 2 s at most, not until our next look.
    local held = redis.call('HGET', shared_values, sharer) or ''
    local answer = busy(queue, alive, token, now, held, expiry - now, math.min(max_block, 500),
                        fallback)
    answer[5] = sharers
    return answer
  end
end
if not v and turn then
  local fence = next_fence(fence_key, retention, now_us)
  redis.call('SET', lock, taken_at(value, now) .. ' fence=' .. fence_text(fence), 'PX', ttl)
  if queued then dequeue(queue, alive, wake_prefix, token) end
  return {1, fence, now, record_start(history, ARGV, 11, fence, now)}
end
return busy(queue, alive, token, now, v, pttl, max_block, fallback)
