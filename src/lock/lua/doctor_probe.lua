-- rlock doctor (lock/needs.cpp): whether the ACL user may run each command rlock's scripts call,
-- on a lock's own keys (KEYS[1], a helper key of the lock) and on its kept output (KEYS[2]),
-- without changing anything. It is sent with EVAL_RO (Redis 7.0 and later): a write the user
-- may run is refused as a write from a read-only script, after the ACL allowed it; one it may
-- not, by the ACL. Neither key exists, so the reads find nothing. Every command a script of
-- src/lock/lua calls must be here (tests/lint_lua.py checks).
-- Returns, for each command: its name, then the error it met on KEYS[1] and on KEYS[2] (''
-- when it ran); needs.cpp tells an ACL's denial from the refusal of a write.
local probes = {
  {'PEXPIRE', '1'}, {'PEXPIREAT', '1'}, {'PTTL'}, {'PERSIST'}, {'DEL'}, {'EXISTS'}, {'TYPE'},
  {'GET'}, {'SET', 'v'}, {'INCR'},
  {'HGET', 'f'}, {'HMGET', 'f'}, {'HGETALL'}, {'HSET', 'f', 'v'}, {'HDEL', 'f'},
  {'LPUSH', 'v'}, {'RPUSH', 'v'}, {'LRANGE', '0', '0'}, {'LREM', '0', 'v'}, {'LTRIM', '0', '0'},
  {'ZADD', '1', 'm'}, {'ZREM', 'm'}, {'ZSCORE', 'm'}, {'ZRANK', 'm'}, {'ZCARD'},
  {'ZRANGE', '0', '0'}, {'ZRANGEBYSCORE', '0', '1'}, {'ZREMRANGEBYSCORE', '0', '1'},
  {'ZREMRANGEBYRANK', '0', '0'},
  {'XADD', '*', 'f', 'v'}, {'XDEL', '0-1'}, {'XTRIM', 'MAXLEN', '1'}, {'XRANGE', '-', '+'},
  {'XREVRANGE', '+', '-'},
}
local function refusal(...)
  local r = redis.pcall(...)
  if type(r) == 'table' and r.err then return r.err end
  return ''
end
local out = {'TIME', refusal('TIME'), ''}
for _, p in ipairs(probes) do
  out[#out + 1] = p[1]
  for k = 1, 2 do out[#out + 1] = refusal(p[1], KEYS[k], unpack(p, 2)) end
end
return out
