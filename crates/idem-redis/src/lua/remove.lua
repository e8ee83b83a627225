local v = redis.call('GET', KEYS[1])
if not v or string.byte(v) == 82 then return 0 end
if string.byte(v) == 70 and ARGV[1] ~= '1' then return 2 end
redis.call('SET', KEYS[1], 'R' .. string.sub(v, 2, 49), 'PX', 1)
if ARGV[2] ~= '' then redis.call('PUBLISH', ARGV[2], KEYS[1]) end
return 1
