-- uses: common.lua
-- Adds a run's output to its stream STREAM (kept_output.h), whose entry IDs are byte offsets:
-- "OFFSET-1" holds the bytes of the command's output from the OFFSET-th on. Sent again after
-- a lost reply, a piece that Redis has already taken is not added twice: only its bytes past
-- the last entry's end are (a piece may have grown, or lost its start to the trim, since).
-- Then only the last KEEP bytes are kept, and the stream lives as long as the index INDEX.
-- ARGV: FENCE, KEEP, RETENTION (ms; 0: for ever), END_OFFSET, END, STATUS, SKIPPED, then
-- OFFSET FIELD BYTES for each piece (FIELD o: stdout, e: stderr). With END_OFFSET (not ''),
-- the output's end follows: an entry at END_OFFSET with fields end, status and skipped.
-- LAST_OUTPUT (KEYS[3]), when given, is the lock's zset of the server's time of each run's
-- last output (fence -> ms): set to now when bytes were added, so that status and inspect
-- tell a run that went silent from one that prints, and a resend that adds nothing leaves
-- it. ATTEMPTS (KEYS[4]), when given, takes the pieces of FIELD a: where an attempt of the
-- command began (--retry), BYTES "ATTEMPT SINCE_MS" scored by OFFSET (SINCE_MS '': now).
-- Returns -1 when the run is no longer among the kept runs (newer ones pushed it out), -2 when
-- the index is gone (it expired: --retention; or Redis lost it: a restart without its data, a
-- failover to a replica that did not have it, FLUSHALL), else the number of entries added.
local stream, index, last_output, attempts = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local fence, keep, retention = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
if redis.call('EXISTS', index) == 0 then return -2 end
if #redis.call('ZRANGEBYSCORE', index, fence, fence, 'LIMIT', 0, 1) == 0 then return -1 end
local last_end = 0  -- where the output Redis has ends
local top = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)[1]
if top then
  if top[2][1] == 'end' then return 0 end  -- all of it, and its end, came before
  last_end = tonumber(string.match(top[1], '^%d+')) + #top[2][2]
end
-- An attempt's mark (a piece of FIELD a): BYTES "ATTEMPT SINCE_MS", at OFFSET.
local function mark_attempt(offset, bytes)
  local attempt, since = string.match(bytes, '^(%d+) (%d*)$')
  if not attempts or not attempt then return end
  if since == '' then since = string.format('%d', now_ms()) end
  redis.call('ZADD', attempts, offset, attempt .. ' ' .. since)
  if retention > 0 then redis.call('PEXPIRE', attempts, retention) end
end
local added, upto, bytes_added = 0, nil, false
for i = 8, #ARGV, 3 do
  local offset, field, bytes = tonumber(ARGV[i]), ARGV[i + 1], ARGV[i + 2]
  if field == 'a' then
    mark_attempt(offset, bytes)
  else
    upto = offset + #bytes
    if upto > last_end then
      if offset < last_end then
        bytes = string.sub(bytes, last_end - offset + 1)
        offset = last_end
      end
      redis.call('XADD', stream, string.format('%d', offset) .. '-1', field, bytes)
      last_end = upto
      added = added + 1
      bytes_added = true
    end
  end
end
if bytes_added and last_output then
  -- pcall: another type under its name costs this record, never the output.
  redis.pcall('ZADD', last_output, now_ms(), fence)
  if retention > 0 then redis.pcall('PEXPIRE', last_output, retention) end
end
if ARGV[4] ~= '' then
  upto = tonumber(ARGV[4])
  redis.call('XADD', stream, ARGV[4] .. '-1', 'end', ARGV[5], 'status', ARGV[6],
             'skipped', ARGV[7])
  added = added + 1
end
if upto and upto > keep then
  local minid = string.format('%d', upto - keep)
  -- XTRIM MINID is Redis 6.2's: on 6.0, the entries before MINID are deleted one by one.
  if type(redis.pcall('XTRIM', stream, 'MINID', minid)) == 'table' then
    local old = redis.call('XRANGE', stream, '-', minid .. '-0')
    for _, e in ipairs(old) do redis.call('XDEL', stream, e[1]) end
  end
end
if retention > 0 then
  redis.call('PEXPIRE', stream, retention)
  redis.call('PEXPIRE', index, retention)
end
return added
