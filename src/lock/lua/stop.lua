-- uses: common.lua
-- rlock stop: asks the holders of a lock to stop their commands (stop_request.h). Each gets
-- REQUEST at the end of its list PREFIX..TOKEN, which its rlock BLPOPs while the command runs.
-- The request holds until= EXPIRY ms from now by the server's clock, after which its asker has
-- given up: the answer (stop_answer.lua) is refused then, so that a holder that comes back
-- later (a host that was away, a frozen rlock, which the server may have handed the request
-- to all the same) never acts on it, and the list expires with its last asker's wait.
-- Requests of operators who ask at the same moment queue, none replacing another: the
-- holder acts on the first it takes and answers each later one with it, so that every asker
-- hears whose stop it was (a replaced request was never answered: its asker said "away").
-- The asker's clock is not trusted: at= in REQUEST becomes the server's now.
-- KEYS: the lock, a semaphore's places and their values, a shared lock's places and their
-- values. TOKEN (if not ''): only that holder; with EVERYWHERE ('1', Redlock), asked whatever
-- this node holds.
-- Returns {kind, token, value, pttl, ...} for the holders asked, kind being 'string' (a lock
-- held alone), 'semaphore' or 'shared'; {kind} with none asked; {'none'} for a free lock;
-- {'broken', value, pttl} for a tombstone left by release --force; {'foreign', type} for a key that
-- is no rlock lock (a plain string: value, then its pttl).
local lock, sem, sem_values, shared, shared_values = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local prefix, request, token, expiry = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local everywhere = ARGV[5] == '1'
local clock = now_ms()
request = string.gsub(request, ' at=[^ ]*', ' at=' .. rfc3339(clock), 1)
request = string.gsub(request, ' until=[^ ]*', ' until=' .. string.format('%.0f', clock + expiry), 1)

local function ask(out, holder, value, pttl)
  local list = prefix .. holder
  redis.call('RPUSH', list, request)
  if redis.call('PTTL', list) < expiry then redis.call('PEXPIRE', list, expiry) end
  for _, x in ipairs({holder, value, pttl}) do out[#out + 1] = x end
end

-- The live places of a semaphore or shared lock, tombstones ("broken-TOKEN") left alone.
local function ask_places(kind, places, values)
  local out = {kind}
  local live = redis.call('ZRANGEBYSCORE', places, clock, '+inf', 'WITHSCORES')
  for i = 1, #live, 2 do
    local member = live[i]
    if string.sub(member, 1, 7) ~= 'broken-' and (token == '' or member == token) then
      ask(out, member, redis.call('HGET', values, member) or '', tonumber(live[i + 1]) - clock)
    end
  end
  return out
end

-- Redlock: TOKEN holds the lock on other nodes, and its holder may listen on this one.
if everywhere then
  local out = {'string'}
  ask(out, token, '', 0)
  return out
end

local t = redis.call('TYPE', lock)['ok']
if t == 'string' then
  local v = redis.call('GET', lock)
  if string.sub(v, 1, 15) == 'rlock/1 broken ' then return {'broken', v, redis.call('PTTL', lock)} end
  local holder = string.match(v, '^rlock/1 (%x+) ')
  if not holder then return {'foreign', t, v, redis.call('PTTL', lock)} end
  local out = {'string'}
  if token == '' or holder == token then ask(out, holder, v, redis.call('PTTL', lock)) end
  return out
end
if t ~= 'none' then return {'foreign', t} end
if redis.call('EXISTS', sem) == 1 then return ask_places('semaphore', sem, sem_values) end
if redis.call('EXISTS', shared) == 1 then return ask_places('shared', shared, shared_values) end
return {'none'}
