-- inspect(), on the record's four keys (key_layout.rs; layout in
-- begin.lua), for operators: 0 if there is no live record, else {value,
-- milliseconds left}.
local key, _, v = find()
if not v or string.byte(v) == RELEASED then return 0 end
return {v, redis.call('PTTL', key)}
