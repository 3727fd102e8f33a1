-- uses: common.lua
-- rlock resume: ends the pause (pause.lua) before its time, and wakes every live waiter: a
-- semaphore's or a shared lock's may all get in, and those that do not wait on as behind a
-- holder. Returns {1, the pause's text}, or {0} when the key was not paused.
local pause, queue, alive = KEYS[1], KEYS[2], KEYS[3]
local wake_prefix = ARGV[1]
local p = redis.call('GET', pause)
if not p then return {0} end
redis.call('DEL', pause)
if redis.call('EXISTS', alive) == 1 then
  prune_waiters(queue, alive, now_ms())
  for _, token in ipairs(redis.call('ZRANGE', queue, 0, -1)) do
    local list = wake_prefix .. token
    if type(redis.pcall('LPUSH', list, '1')) == 'number' then
      redis.call('LTRIM', list, 0, 0)
      redis.call('PEXPIRE', list, 60000)
    end
  end
end
return {1, p}
