-- uses: common.lua
-- rlock reset-period: forgets this period's run, so that the next --once-per run runs the job.
-- Returns {0} when the period has no run recorded, {2, host, since} while that run still holds
-- the lock (nothing changed), else {1, host, since, state, status, end} of the forgotten run.
-- The run is known by its fence: still running while the lock, or a live place of the
-- semaphore (--limit), carries that fence. A slot "running" whose fence no holder carries
-- belongs to a run that died; another run holding the lock now is not this period's.
local slot, lock, sem, holders = KEYS[1], KEYS[2], KEYS[3], KEYS[4]

local s = redis.pcall('HGETALL', slot)
if type(s) ~= 'table' or s.err then
  return redis.error_reply('WRONGTYPE ' .. slot .. ' is not a period slot')
end
if #s == 0 then return {0} end
local f = {}
for i = 1, #s, 2 do f[s[i]] = s[i + 1] end

local function fence_of(value)
  return type(value) == 'string' and string.match(value, ' fence=(%d+)$') or nil
end

local function still_holds(fence)
  local v = redis.pcall('GET', lock)
  if fence_of(v) == fence then return true end
  if redis.call('TYPE', sem)['ok'] ~= 'zset' then return false end
  for _, token in ipairs(redis.call('ZRANGEBYSCORE', sem, '(' .. now_ms(), '+inf')) do
    if fence_of(redis.call('HGET', holders, token)) == fence then return true end
  end
  return false
end

if f.state == 'running' and f.fence and still_holds(f.fence) then
  return {2, f.host or '', f.since or ''}
end
redis.call('DEL', slot)
return {1, f.host or '', f.since or '', f.state or '', f.status or '', f['end'] or ''}
