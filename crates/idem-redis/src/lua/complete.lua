local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 34, 49) ~= ARGV[1] then return 0 end
local state = string.byte(v)
if state == 70 then
  redis.call('SET', KEYS[1], 'C' .. string.sub(v, 2, 49) .. ARGV[3], 'PX', ARGV[2])
  if ARGV[4] ~= '' then redis.call('PUBLISH', ARGV[4], KEYS[1]) end
  return 1
end
if state == 67 then return 1 end
return 0
