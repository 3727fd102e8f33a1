-- uses: common.lua, periods.lua
-- --once-per: claims this period's slot unless an earlier run of the period holds it.
-- Returns {1}, or {0, host, since, state, status, end} of the run that has it, with state
-- "in-progress" while that run still holds a place of the semaphore (--limit). A slot still
-- "running" otherwise belongs to a run that died without saying how it ended: lost, and a
-- failure for --retry-failed. A claim sent again (the reply to the first was lost) finds its
-- own fence: {1} again.
local slot, lock, sem, holders = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local host, pid, user, since, fence = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local retry_failed, expire_at = ARGV[6] == '1', ARGV[7]

local s = redis.pcall('HGETALL', slot)
if type(s) ~= 'table' or s.err then
  return redis.error_reply('WRONGTYPE ' .. slot .. ' is not a period slot')
end
if #s > 0 then
  local f = {}
  for i = 1, #s, 2 do f[s[i]] = s[i + 1] end
  if f.state == 'running' and f.fence == fence then return {1} end
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
           'since', since, 'fence', fence)
redis.call('PEXPIREAT', slot, expire_at)
return {1}
