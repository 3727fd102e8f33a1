-- uses: common.lua
-- --once-per: records the end of our run in the period's slot (1), unless a later run
-- (--retry-failed) took the slot over (0). Sent again (the reply to the first was lost), it
-- finds our end recorded and leaves it as it was: 1. The end's time is the server's clock.
local slot = KEYS[1]
local fence, status, how = ARGV[1], ARGV[2], ARGV[3]

local f = redis.call('HMGET', slot, 'fence', 'state')
if f[1] ~= fence then return 0 end
if f[2] == 'done' then return 1 end
redis.call('HSET', slot, 'state', 'done', 'status', status, 'end', how, 'ended', rfc3339(now_ms()))
return 1
