-- --once-per: records the end of our run in the period's slot (1), unless a later run
-- (--retry-failed) took the slot over (0).
local slot = KEYS[1]
local fence, status, how, ended = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

if redis.call('HGET', slot, 'fence') ~= fence then return 0 end
redis.call('HSET', slot, 'state', 'done', 'status', status, 'end', how, 'ended', ended)
return 1
