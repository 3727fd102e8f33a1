-- Shared by the lock scripts: the server's clock and the waiting queue. A script that uses
-- these names this file on its "-- uses:" line; the build puts the two together (scripts.h).
--
-- Time is the server's (TIME), the clock Redis expires keys by, so a semaphore slot ends when a
-- lock key with the same ttl would.
--
-- Waiting: a waiter that finds the lock busy joins the queue and BLPOPs its own wake-up list.
-- A release pushes to the list of the first live waiter only: one release wakes one waiter,
-- and a release that happens before the waiter blocks is not lost (the element waits in the
-- list). A waiter's place lasts as long as it said it would block, plus a margin of 1.5 s; one
-- that died is pruned, so the queue never wedges behind it (--fair waiters block at most
-- 500 ms at a time, so a dead one holds up a free lock for at most 2 s).

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The run's phase (run_phase.h): TOKEN's field of the hash PHASES, kept at least TTL ms more,
-- as long as the lock (a semaphore's, as long as its longest place). ARGS from FIRST on: 'set'
-- TEXT AGO DUE stores TEXT with its times made the server's (AGO ms before NOW, DUE ms after),
-- 'clear' removes it, 'keep' keeps it alive, '' or none leaves it alone. Called only by a
-- renewal that found the lock ours: a phase never brings back a lock released or expired, and
-- it dies with the lock (the release removes it, or it expires with the last renewal's ttl).
local function keep_phase(phases, token, args, first, ttl, now)
  local op = args[first]
  if not phases or not op or op == '' then return end
  if op == 'clear' then
    redis.call('HDEL', phases, token)
    return
  end
  if op == 'set' then
    local ago, due = tonumber(args[first + 2]), tonumber(args[first + 3])
    local times = string.format('since=%.0f due=%.0f ', now - ago, now + due)
    redis.call('HSET', phases, token, times .. args[first + 1])
  end
  if redis.call('PTTL', phases) < ttl then redis.call('PEXPIRE', phases, ttl) end
end

-- The server's clock in ms and in microseconds, from one TIME.
local function clock()
  local t = redis.call('TIME')
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  return math.floor(us / 1000), us
end

-- The next fence of a lock: one more than the last, and never less than the server's clock in
-- microseconds (CLOCK_US). So a counter that is gone (expired after --retention, FLUSHALL, a
-- restart without data) starts again above every fence handed out before: each of those was at
-- most the clock at its acquisition, or one more than the fence before it within the same
-- microsecond. That holds as long as the server's clock does not step back. The counter is
-- kept RETENTION ms after this use (0: for ever). Fences stay below 2^53 (until the year 2255),
-- exact in a Lua number and in JSON; Lua would print them in exponent form, hence fence_text.
local function next_fence(fence_key, retention, clock_us)
  local fence = redis.call('INCR', fence_key)
  -- Past 2^53 a Lua number is no longer exact, and two fences could come out equal.
  if fence >= 9007199254740992 then error(fence_key .. ' is past 2^53: not a fence counter') end
  if fence < clock_us then
    -- The usual case (an acquisition a microsecond or more after the last): one SET, its
    -- expiry with it.
    fence = clock_us
    if retention > 0 then
      redis.call('SET', fence_key, string.format('%.0f', fence), 'PX', retention)
    else
      redis.call('SET', fence_key, string.format('%.0f', fence))
    end
  elseif retention > 0 then
    redis.call('PEXPIRE', fence_key, retention)
  else
    redis.call('PERSIST', fence_key)
  end
  return fence
end

local function fence_text(fence)
  return string.format('%.0f', fence)
end

-- Removes the members of ZSET whose score (an expiry in ms) is past NOW, at most 1000 a call,
-- and their entries in OTHER, removed by REMOVE: ZREM (a zset) or HDEL (a hash).
local function drop_expired(zset, other, remove, now)
  local gone = redis.call('ZRANGEBYSCORE', zset, '-inf', now, 'LIMIT', 0, 1000)
  if #gone > 0 then
    redis.call(remove, other, unpack(gone))
    redis.call('ZREM', zset, unpack(gone))
  end
end

-- Waiters whose place lapsed (they died, or stopped waiting without saying so).
local function prune_waiters(queue, alive, now)
  drop_expired(alive, queue, 'ZREM', now)
end

local function wake_first(queue, alive, wake_prefix, now)
  if redis.call('EXISTS', alive) == 0 then return end  -- no waiter: the usual case, one look
  prune_waiters(queue, alive, now)
  local first = redis.call('ZRANGE', queue, 0, 0)[1]
  if first then
    -- pcall: under maxmemory with noeviction LPUSH is refused, and the release must stand
    -- anyway (the waiter then wakes at its fallback, the old holder's expiry).
    local list = wake_prefix .. first
    if type(redis.pcall('LPUSH', list, '1')) == 'number' then
      redis.call('LTRIM', list, 0, 0)
      redis.call('PEXPIRE', list, 60000)
    end
  end
end

-- The ends of runs that Redis has applied (a release, a history entry), by token, each kept a
-- minute (zset ENDS: 'WHAT TOKEN' -> expiry in ms). An end sent again, because the reply to
-- the first was lost with a connection closed under it, finds the first and changes nothing:
-- so the end of a run can be re-sent until it is answered, none lost, none applied twice.
local k_end_kept_ms = 60000

-- Drops the ends that are past keeping (their score).
local function prune_ends(ends, now)
  redis.call('ZREMRANGEBYSCORE', ends, '-inf', now)
end

local function ended(ends, what, token, now)
  prune_ends(ends, now)
  return redis.call('ZSCORE', ends, what .. ' ' .. token) ~= false
end

-- Records the ends MARKS ('WHAT TOKEN', one or more) in one ZADD, the ends past keeping
-- dropped first: the PEXPIRE of each mark keeps a lock in steady use from ever expiring ENDS, so
-- every mark prunes, or ENDS would grow for as long as the lock is used.
local function mark_ended(ends, now, ...)
  prune_ends(ends, now)
  local members = {}
  for _, mark in ipairs({...}) do
    members[#members + 1] = now + k_end_kept_ms
    members[#members + 1] = mark
  end
  redis.call('ZADD', ends, unpack(members))
  redis.call('PEXPIRE', ends, k_end_kept_ms)
end

local function dequeue(queue, alive, wake_prefix, token)
  redis.call('ZREM', queue, token)
  redis.call('ZREM', alive, token)
  redis.call('DEL', wake_prefix .. token)
end

-- How long a waiter blocks before it looks again: until the holder's expiry when the holder is
-- rlock (it wakes us on release), at most FALLBACK when it is other software (it does not).
local function block_for(value, pttl, max_block, fallback)
  local b = fallback
  if value and string.sub(value, 1, 8) == 'rlock/1 ' and pttl >= 0 then
    b = pttl + 1
  elseif pttl >= 0 then
    b = math.min(pttl + 1, fallback)
  end
  return math.max(1, math.min(b, max_block))
end

local function enqueue(queue, alive, token, now, block)
  local t = redis.call('TIME')
  redis.call('ZADD', queue, 'NX', t[1] * 1000000 + t[2], token)
  redis.call('ZADD', alive, now + block + 1500, token)
  local last = redis.call('ZRANGE', alive, -1, -1, 'WITHSCORES')[2]
  local keep = math.max(1000, tonumber(last) - now + 1000)
  redis.call('PEXPIRE', queue, keep)
  redis.call('PEXPIRE', alive, keep)
end

-- A pause (rlock pause, pause.h): nobody takes the lock while the key PAUSE lives. The answer
-- to a caller that finds one: {2, the pause's text, its pttl, block}, nil when there is none.
-- A waiter joins the queue and blocks until the pause ends, or resume wakes the first waiter.
local function paused(pause, queue, alive, token, now, max_block)
  local p = redis.call('GET', pause)
  if not p then return nil end
  local pttl = redis.call('PTTL', pause)
  local block = 0
  if max_block > 0 then
    block = math.max(1, math.min(pttl + 1, max_block))
    enqueue(queue, alive, token, now, block)
  end
  return {2, p, pttl, block}
end

-- The answer to a caller that did not get the lock: who holds it (value, pttl) and, when it
-- waits (MAX_BLOCK > 0), how long to block; a waiter joins the queue here.
local function busy(queue, alive, token, now, value, pttl, max_block, fallback)
  local block = 0
  if max_block > 0 then
    block = block_for(value, pttl, max_block, fallback)
    enqueue(queue, alive, token, now, block)
  end
  return {0, value or '', pttl, block}
end

-- The server's clock MS as rlock writes times (wall_time.h): 2026-11-30T03:12:00.123Z. Every
-- time rlock records (a holder's since, a run's start and end, a period's run) is the server's,
-- so that a host whose clock is off records the same times as the others (days from the epoch
-- to a civil date by 400-year eras of 146097 days, exact for any date after 1970).
local function rfc3339(ms)
  local s = math.floor(ms / 1000)
  local days = math.floor(s / 86400)
  local secs = s - days * 86400
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524)
                          - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local d = doy - math.floor((153 * mp + 2) / 5) + 1
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400 + (m <= 2 and 1 or 0)
  return string.format('%04d-%02d-%02dT%02d:%02d:%02d.%03dZ', y, m, d, math.floor(secs / 3600),
                       math.floor(secs % 3600 / 60), secs % 60, ms - s * 1000)
end

-- A holder's value with since= the server's NOW: the moment the lock was taken, not the moment
-- its holder began to wait for it, nor its own clock's idea of that moment.
local function taken_at(value, now)
  return (string.gsub(value, ' since=[^ ]*', ' since=' .. rfc3339(now), 1))
end

-- The run history (history.h): a capped stream, kept RETENTION ms after its last use (0: kept).
local function keep_history(history, retention)
  if retention > 0 then
    redis.call('PEXPIRE', history, retention)
  else
    redis.call('PERSIST', history)
  end
end

-- Keeps the entry ID with FIELDS in the hash LAST_SUCCESS when it is a success (it exited 0), in
-- place of the success before; the hash expires with the history.
local function keep_success(last_success, id, fields, retention)
  local f = {}
  for i = 1, #fields - 1, 2 do f[fields[i]] = fields[i + 1] end
  if f['end'] == 'exited' and f.status == '0' then
    redis.call('DEL', last_success)
    redis.call('HSET', last_success, 'id', id, unpack(fields))
  end
  keep_history(last_success, retention)
end

-- A run's end in the history, replacing its start entry (history_add.lua, and release.lua, where
-- it rides with the release). ARGS from FIRST on: the run's token, the history's length and
-- retention, the start entry's ID or '', then the entry's fields (none: the start is only
-- removed). 1 and the end for its caller to record (mark_ended) once it has done the rest of
-- its work, or 0 when this token's entry is there already (a delivery sent again). FIRST_TIME:
-- the caller knows that no delivery of this entry ran before (release.lua found the lock ours,
-- which one would have released): the ends are not looked up.
-- LAST_SUCCESS, when given, is a hash that holds the newest success's entry (its ID under
-- "id", then its fields), so that `rlock check` finds the last success in one step however
-- many failures came after it (docs/DESIGN.md, "rlock check"); it lives as long as the history.
local function add_history(history, ends, args, first, now, first_time, last_success)
  local token, max_length = args[first], tonumber(args[first + 1])
  local retention, start = tonumber(args[first + 2]), args[first + 3]
  if not first_time and ended(ends, 'history', token, now) then return 0 end
  if start ~= '' then redis.call('XDEL', history, start) end
  if #args < first + 4 then return 1 end
  local fields = {unpack(args, first + 4)}
  for i = 1, #fields - 1, 2 do
    if fields[i] == 'since' and fields[i + 1] == '' then fields[i + 1] = rfc3339(now) end
  end
  local id = redis.call('XADD', history, 'MAXLEN', max_length > 100 and '~' or '=', max_length,
                        '*', unpack(fields))
  keep_history(history, retention)
  if last_success then keep_success(last_success, id, fields, retention) end
  return 1, 'history ' .. token
end

-- A run's start, recorded in the same step that takes the lock (or claims its period), so that
-- a run whose rlock dies (SIGKILL, the OOM killer, a host that lost power) is in the history
-- all the same: its entry, end=running, says "running" while the run's fence holds the lock
-- and "end unknown" once it does not. The run's end replaces it (history_add.lua). ARGS
-- from FIRST on: the history's length (none or 0: nothing is recorded), its retention, then the
-- entry's fields. Returns the entry's ID, or ''.
local function record_start(history, args, first, fence, now)
  local max_length = tonumber(args[first])
  if not history or not max_length or max_length <= 0 then return '' end
  -- pcall: a history that cannot be written (another type under its name, a full memory)
  -- never keeps the lock from being taken; the run's end says so (one warning).
  local id = redis.pcall('XADD', history, 'MAXLEN', max_length > 100 and '~' or '=', max_length,
                         '*', 'since', rfc3339(now), 'fence', fence_text(fence), 'end', 'running',
                         unpack(args, first + 2))
  if type(id) ~= 'string' then return '' end
  keep_history(history, tonumber(args[first + 1]))
  return id
end

-- The start entry of the run with FENCE, for an acquisition sent again (its first reply was
-- lost): among the newest entries, where a run that has just taken the lock finds its own.
local function started_entry(history, args, first, fence)
  if not history or (tonumber(args[first]) or 0) <= 0 then return '' end
  local entries = redis.pcall('XREVRANGE', history, '+', '-', 'COUNT', 20)
  if entries.err then return '' end
  for _, e in ipairs(entries) do
    local f = {}
    for i = 1, #e[2], 2 do f[e[2][i]] = e[2][i + 1] end
    if f.fence == fence_text(fence) and f['end'] == 'running' then return e[1] end
  end
  return ''
end
