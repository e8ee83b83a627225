#!lua flags=allow-oom
-- remove(force, channel), on the record's four keys (key_layout.rs; layout
-- in begin.lua). Replies 1 removed, 2 refused (in flight, not forced), 0
-- absent. Each branch names its row of idem_core::machine's table.
local key, _, v = find()
local state = v and string.byte(v)
if v then refuse_newer(state) end
-- A traced record past its replay is only a trace.
local trace_only = state == TRACED and #v >= TRACED_LEAST and replay_left(key, v) <= 0
if not v or state == RELEASED or trace_only then
  -- traced | remove -> Removed: a late retry runs again (its token, drawn
  -- from the clock, above the removed one's).
  local removed = redis.call('DEL', KEYS[2], KEYS[4])
  if trace_only then removed = removed + redis.call('DEL', key) end
  if removed > 0 then return 1 end
  -- none | remove -> Absent.
  return 0
end
-- in flight, no force | remove -> RemoveRefused.
if state == IN_FLIGHT and ARGV[1] ~= '1' then return 2 end
-- completed, or in flight with force | remove -> Removed: ends now, token
-- kept (as a release: 'R' for 1 ms).
redis.call('SET', key, RELEASED_TAG .. string.sub(v, FINGERPRINT_FROM, TOKEN_TO), 'PX', 1)
redis.call('DEL', KEYS[2], KEYS[4])
if ARGV[2] ~= '' then redis.call('PUBLISH', ARGV[2], wake_key()) end
return 1
