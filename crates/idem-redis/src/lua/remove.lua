#!lua flags=allow-oom
-- remove(force, channel), on KEYS[1], the record (layout in begin.lua), and
-- KEYS[2], its trace.
-- Replies 1 removed, 2 refused (in flight, not forced), 0 absent. Each
-- branch names its row of idem_core::machine's table.
local v = redis.call('GET', KEYS[1])
local state = v and string.byte(v)
if v then refuse_newer(state) end
if not v or string.byte(v) == RELEASED then
  -- traced | remove -> Removed: a late retry runs again.
  if redis.call('DEL', KEYS[2]) == 1 then return 1 end
  -- none | remove -> Absent.
  return 0
end
-- in flight, no force | remove -> RemoveRefused.
if string.byte(v) == IN_FLIGHT and ARGV[1] ~= '1' then return 2 end
-- completed, or in flight with force | remove -> Removed: ends now, token
-- kept (as a release: 'R' for 1 ms).
redis.call('SET', KEYS[1], RELEASED_TAG .. string.sub(v, FINGERPRINT_FROM, TOKEN_TO), 'PX', 1)
redis.call('DEL', KEYS[2])
if ARGV[2] ~= '' then redis.call('PUBLISH', ARGV[2], KEYS[1]) end
return 1
