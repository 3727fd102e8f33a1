-- Shared by the semaphore scripts (--limit): up to LIMIT holders, each with its own token and
-- expiry (server time, ms) in one zset, their values in a hash. An expired holder's slot is
-- reclaimed at the next look. Scripts name common.lua before this file: it uses drop_expired.

local function expire_holders(sem, holders, now)
  drop_expired(sem, holders, 'HDEL', now)
end

-- The semaphore's keys live as long as its longest holder.
local function keep_semaphore(sem, holders, now)
  local last = redis.call('ZRANGE', sem, -1, -1, 'WITHSCORES')[2]
  if last then
    local keep = math.max(1, tonumber(last) - now)
    redis.call('PEXPIRE', sem, keep)
    redis.call('PEXPIRE', holders, keep)
  end
end
