-- inspect(), on KEYS[1], the record (layout in begin.lua), for operators:
-- 0 if there is no live record, else {value, milliseconds left}.
local v = redis.call('GET', KEYS[1])
if not v or string.byte(v) == RELEASED then return 0 end
return {v, redis.call('PTTL', KEYS[1])}
