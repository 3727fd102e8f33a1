-- uses: common.lua, slots.lua
-- release --force on a semaphore (--limit): each chosen place becomes a tombstone that keeps
-- it taken until its broken holder has surely stopped (the argument of break_lock.lua: the
-- place's expiry, which its renewals set, is past the holder's own deadline). The tombstone is
-- the member "broken-TOKEN" with the place's expiry, its value in the hash; the holder's rlock
-- ends it sooner once its command has stopped (semaphore_release.lua).
--
-- TOKEN (if not ''): that holder's place; ALL ('1'): every place; neither: nothing, and the
-- answer says how many places there are. NOW ('1'): delete instead, waking a waiter for each.
-- Returns {type} when SEM is not a semaphore, {'zset', 'choose', places} when neither TOKEN
-- nor ALL was given, else {'zset', 'done', token, value, pttl, what, token, value ...} with
-- what as in break_lock.lua ('other': TOKEN holds no place).
local sem, holders, queue, alive = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local wake_prefix, breaker, token = ARGV[1], ARGV[2], ARGV[3]
local all, now = ARGV[4] == '1', ARGV[5] == '1'
-- When it was broken is the server's clock, as every time rlock records (common.lua).
breaker = string.gsub(breaker, ' broken_at=[^ ]*', ' broken_at=' .. rfc3339(now_ms()), 1)

local clock = now_ms()
expire_holders(sem, holders, clock)
local t = redis.call('TYPE', sem)['ok']
if t ~= 'zset' then return {t} end
local places = redis.call('ZRANGE', sem, 0, -1, 'WITHSCORES')
if token == '' and not all then return {t, 'choose', #places / 2} end
local out = {t, 'done'}
local function report(member, value, pttl, what)
  for _, x in ipairs({member, value, pttl, what}) do out[#out + 1] = x end
end
local found = false
for i = 1, #places, 2 do
  local member, expiry = places[i], tonumber(places[i + 1])
  local broken = string.sub(member, 1, 7) == 'broken-'
  local owner = broken and string.sub(member, 8) or member
  if all or owner == token then
    found = true
    local value = redis.call('HGET', holders, member) or ''
    local pttl = math.max(1, expiry - clock)
    if now then
      redis.call('ZREM', sem, member)
      redis.call('HDEL', holders, member)
      wake_first(queue, alive, wake_prefix, clock)
      report(owner, value, pttl, 'deleted')
    elseif broken then
      report(owner, value, pttl, 'already')
    else
      local was = string.sub(value, 9)
      if string.sub(value, 1, 8) ~= 'rlock/1 ' then was = '-' end
      redis.call('ZREM', sem, member)
      redis.call('HDEL', holders, member)
      redis.call('ZADD', sem, expiry, 'broken-' .. member)
      redis.call('HSET', holders, 'broken-' .. member, 'rlock/1 broken ' .. was .. breaker)
      report(owner, value, pttl, 'broken')
    end
  end
end
if not found then report(token, '', -2, 'other') end
keep_semaphore(sem, holders, clock)
return out
