-- uses: common.lua
-- A holder's answer to one rlock stop (stop_request.h): it takes the request unless its asker
-- has given up on it, that is unless DEADLINE (the request's until=, the server's ms:
-- stop.lua) is past. 1 taken: the answer TEXT ("taken", or "stopping" and the request taken
-- before) is in that asker's list ANSWER, which it BLPOPs, for a minute; 0 given up: the holder
-- goes on.
local answer, deadline = KEYS[1], tonumber(ARGV[1])
if now_ms() > deadline then return 0 end
redis.call('RPUSH', answer, ARGV[2])
redis.call('PEXPIRE', answer, 60000)
return 1
