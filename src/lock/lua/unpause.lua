-- rlock pause under Redlock, when fewer than a quorum of nodes took the pause (pause.cpp):
-- takes it back on this node, and puts back the pause it replaced. ARGV[1] is the pause as
-- sent: each node wrote its own at= and until=, so a node whose reply was lost is matched on
-- the rest of the text, and gets back what another node said it replaced. Then, for each
-- node that replied: the pause it wrote, the pause it replaced ('' for none) and that one's
-- time left then, in ms.
-- Returns 1 when this node's pause was taken back, else 0 (another pause is there now).
local pause = KEYS[1]
local now = redis.call('GET', pause)
if not now then return 0 end
for i = 2, #ARGV, 3 do
  if now == ARGV[i] then
    local was, was_ms = ARGV[i + 1], tonumber(ARGV[i + 2])
    if was ~= '' and was_ms > 0 then
      redis.call('SET', pause, was, 'PX', was_ms)
    else
      redis.call('DEL', pause)
    end
    return 1
  end
end
local function sent_as(text)
  return (string.gsub(string.gsub(text, ' at=[^ ]*', ' at=-', 1), ' until=[^ ]*', ' until=-', 1))
end
if sent_as(now) ~= sent_as(ARGV[1]) then return 0 end
-- What it replaced here is not known: what it replaced on another node, the same pause but
-- for that node's at= and until=, if any.
for i = 2, #ARGV, 3 do
  local was, was_ms = ARGV[i + 1], tonumber(ARGV[i + 2])
  if was ~= '' and was_ms > 0 then
    redis.call('SET', pause, was, 'PX', was_ms)
    return 1
  end
end
redis.call('DEL', pause)
return 1
