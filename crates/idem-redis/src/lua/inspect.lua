-- inspect(), on the record's four keys (key_layout.rs; layout in
-- begin.lua), for operators: 0 if there is no live record (a traced
-- record past its replay is only a trace), else {value, milliseconds
-- left} (of the lease, or of the replay).
local key, _, v = find()
if not v or string.byte(v) == RELEASED then return 0 end
if string.byte(v) == TRACED and #v >= TRACED_LEAST then
  local left = replay_left(key, v)
  if left <= 0 then return 0 end
  return {v, left}
end
return {v, redis.call('PTTL', key)}
