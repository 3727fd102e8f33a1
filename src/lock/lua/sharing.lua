-- Shared by the scripts of a shared lock (--shared, flock -s) and by acquire.lua, whose
-- exclusive holder they keep out. A lock is held alone, by the value under its key (the plain
-- lock), or shared by any number of holders, each a place with its own token and expiry
-- (server ms) in one zset, its value in a hash: the layout of a semaphore (slots.lua), under
-- keys of its own. Never both: each acquire script looks at the other kind in the same step.
--
-- Starvation: a waiter in the queue wants the lock alone unless it is marked in SHARING (a
-- zset token -> end of its place, as in alive), which only shared requests write; so a waiter
-- of an older rlock counts as exclusive. Once a waiter that wants the lock alone is queued, a
-- shared request that came after it waits behind it, even while the lock is shared: a stream
-- of shared holders cannot keep it out for ever. Scripts name common.lua and slots.lua before
-- this file: it uses expire_holders and wake_first.

-- The live place of SHARED that ends last, with its expiry and the number of live places; nil
-- when there is none. Expired places are dropped first.
local function last_sharer(shared, values, now)
  expire_holders(shared, values, now)
  local last = redis.call('ZRANGE', shared, -1, -1, 'WITHSCORES')
  if not last[1] then return nil end
  return last[1], tonumber(last[2]), redis.call('ZCARD', shared)
end

-- The first waiter of QUEUE that wants the lock alone, among the first RANK (all of them when
-- RANK is nil: we are not queued); nil when there is none.
local function exclusive_waiter_ahead(queue, sharing, rank)
  local from = 0
  while true do
    local to = from + 99
    if rank then to = math.min(to, rank - 1) end
    if to < from then return nil end
    local batch = redis.call('ZRANGE', queue, from, to)
    if #batch == 0 then return nil end
    for _, waiter in ipairs(batch) do
      if not redis.call('ZSCORE', sharing, waiter) then return waiter end
    end
    from = to + 1
  end
end

-- Once a shared holder got in, the next waiter in line is woken if it shares too: one release
-- of the lock lets in the whole run of shared waiters at the head of the queue, one round trip
-- each, while a waiter that wants the lock alone is left to the last shared release.
local function wake_next_sharer(queue, alive, sharing, wake_prefix, now)
  local next = redis.call('ZRANGE', queue, 0, 0)[1]
  if next and redis.call('ZSCORE', sharing, next) then
    wake_first(queue, alive, wake_prefix, now)
  end
end
