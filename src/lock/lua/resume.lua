-- uses: common.lua
-- rlock resume: ends the pause (pause.lua) before its time, and wakes the first waiter, as a
-- release does; the others look again within their block. Returns {1, the pause's text}, or
-- {0} when the key was not paused.
local pause, queue, alive = KEYS[1], KEYS[2], KEYS[3]
local wake_prefix = ARGV[1]
local p = redis.call('GET', pause)
if not p then return {0} end
redis.call('DEL', pause)
wake_first(queue, alive, wake_prefix, now_ms())
return {1, p}
