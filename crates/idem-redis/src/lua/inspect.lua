local v = redis.call('GET', KEYS[1])
if not v or string.byte(v) == 82 then return 0 end
return {v, redis.call('PTTL', KEYS[1])}
