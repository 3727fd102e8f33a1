-- uses: common.lua, periods.lua
-- --once-per: claims this period's slot unless an earlier run of the period holds it.
-- Returns {1, start}, or {0, host, since, state, status, end} of the run that has it, with state
-- "in-progress" while that run still holds a place of the semaphore (--limit). A slot still
-- "running" otherwise belongs to a run that died without saying how it ended: lost, and a
-- failure for --retry-failed. A claim sent again (the reply to the first was lost) finds its
-- own fence: {1, start} again. The run's since is the server's clock now; START is the ID of
-- the run's start entry in HISTORY (KEYS[5], with ARGV[7] on: record_start in common.lua), or
-- '': recorded here rather than when the lock was taken, so that the hosts that find the
-- period done record nothing.
local slot, lock, sem, holders, history = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local host, pid, user, fence = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local retry_failed, expire_at = ARGV[5] == '1', ARGV[6]

local now = now_ms()

local s = redis.pcall('HGETALL', slot)
if type(s) ~= 'table' or s.err then
  return redis.error_reply('WRONGTYPE ' .. slot .. ' is not a period slot')
end
if #s > 0 then
  local f = {}
  for i = 1, #s, 2 do f[s[i]] = s[i + 1] end
  if f.state == 'running' and f.fence == fence then
    return {1, started_entry(history, ARGV, 7, tonumber(fence))}
  end
  if f.state == 'running' and f.fence and run_still_holds(lock, sem, holders, f.fence) then
    return {0, f.host or '', f.since or '', 'in-progress', '', ''}
  end
  local failed = f.state == 'running' or (f.status ~= nil and f.status ~= '0')
  if not (retry_failed and failed) then
    return {0, f.host or '', f.since or '', f.state or '', f.status or '', f['end'] or ''}
  end
  redis.call('DEL', slot)
end
redis.call('HSET', slot, 'state', 'running', 'host', host, 'pid', pid, 'user', user,
           'since', rfc3339(now), 'fence', fence)
redis.call('PEXPIREAT', slot, expire_at)
return {1, record_start(history, ARGV, 7, tonumber(fence), now)}
