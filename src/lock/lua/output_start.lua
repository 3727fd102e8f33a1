-- A run's output is to be kept (kept_output.h): the run, its member MEMBER ("FENCE " and its
-- holder's lock value), joins the index of kept runs, scored by its fence. Only the newest
-- RUNS are kept: the older ones leave the index and their streams (STREAMS .. their fence)
-- are deleted, with their attempts' marks (STREAMS .. their fence .. '-attempts') and their
-- member of LAST_OUTPUT, when given (output_append.lua). The index lives as long as the lock's
-- history (RETENTION ms; 0: for ever).
local index, last_output = KEYS[1], KEYS[2]
local fence, member, runs, retention, streams =
  ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
redis.call('ZADD', index, fence, member)
local over = redis.call('ZCARD', index) - runs
if over > 0 then
  for _, old in ipairs(redis.call('ZRANGE', index, 0, over - 1)) do
    local old_fence = string.match(old, '^%d+')
    redis.call('DEL', streams .. old_fence, streams .. old_fence .. '-attempts')
    if last_output then redis.pcall('ZREM', last_output, old_fence) end
  end
  redis.call('ZREMRANGEBYRANK', index, 0, over - 1)
end
if retention > 0 then redis.call('PEXPIRE', index, retention) end
return 1
