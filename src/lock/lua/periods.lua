-- Shared by the --once-per scripts: a period's run is known by its fence, and it still runs
-- while the lock, or a live place of the semaphore (--limit), carries that fence. A period
-- "running" whose fence no holder carries belongs to a run that died. Scripts name
-- common.lua before this file: it uses now_ms.

local function fence_of(value)
  return type(value) == 'string' and string.match(value, ' fence=(%d+)$') or nil
end

local function run_still_holds(lock, sem, holders, fence)
  if fence_of(redis.pcall('GET', lock)) == fence then return true end
  if redis.call('TYPE', sem)['ok'] ~= 'zset' then return false end
  for _, token in ipairs(redis.call('ZRANGEBYSCORE', sem, '(' .. now_ms(), '+inf')) do
    if fence_of(redis.call('HGET', holders, token)) == fence then return true end
  end
  return false
end
