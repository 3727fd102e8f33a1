-- uses: common.lua, periods.lua
-- rlock reset-period: forgets this period's run, so that the next --once-per run runs the job.
-- Returns {0} when the period has no run recorded, {2, host, since} while that run still holds
-- the lock (nothing changed), else {1, host, since, state, status, end} of the forgotten run.
local slot, lock, sem, holders = KEYS[1], KEYS[2], KEYS[3], KEYS[4]

local s = redis.pcall('HGETALL', slot)
if type(s) ~= 'table' or s.err then
  return redis.error_reply('WRONGTYPE ' .. slot .. ' is not a period slot')
end
if #s == 0 then return {0} end
local f = {}
for i = 1, #s, 2 do f[s[i]] = s[i + 1] end
if f.state == 'running' and f.fence and run_still_holds(lock, sem, holders, f.fence) then
  return {2, f.host or '', f.since or ''}
end
redis.call('DEL', slot)
return {1, f.host or '', f.since or '', f.state or '', f.status or '', f['end'] or ''}
