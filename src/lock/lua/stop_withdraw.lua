-- rlock stop interrupted (Ctrl-C): takes asker ID's requests out of the holders' lists KEYS
-- (stop.lua), those not taken yet, so that none is acted on after its asker gave up. Other
-- askers' requests stay: they still wait for their answers, and a DEL of the list would leave
-- them to say the holder is away.
local id = ARGV[1]
local mark = ' id=' .. id .. ' '
for _, list in ipairs(KEYS) do
  for _, request in ipairs(redis.call('LRANGE', list, 0, -1)) do
    if string.find(request, mark, 1, true) then redis.call('LREM', list, 0, request) end
  end
end
return 0
