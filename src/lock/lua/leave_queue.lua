-- uses: common.lua
-- A waiter that gives up leaves the queue; if it was first in line, the next one is woken in
-- its place, in case the wake-up it will not use was meant to hand it the lock. SHARING, when
-- given, marks the waiters that share (--shared: sharing.lua); we no longer wait there either.
local queue, alive, sharing = KEYS[1], KEYS[2], KEYS[3]
local token, wake_prefix = ARGV[1], ARGV[2]

local first = redis.call('ZRANGE', queue, 0, 0)[1]
dequeue(queue, alive, wake_prefix, token)
if sharing then redis.call('ZREM', sharing, token) end
if first == token then wake_first(queue, alive, wake_prefix, now_ms()) end
return 1
