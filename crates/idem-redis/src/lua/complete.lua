#!lua flags=allow-oom
-- complete(token, ttl_ms, outcome, channel, trace_ms), on KEYS[1], the
-- record (layout in begin.lua), and KEYS[2], its trace. Replies 1 completed
-- (now, or before by this token), 0 the claim is lost. Each branch names its
-- row of idem_core::machine's table.
local v = redis.call('GET', KEYS[1])
-- anything else | complete -> LeaseLost (no live record, another token).
if not v or string.sub(v, TOKEN_FROM, TOKEN_TO) ~= ARGV[1] then return 0 end
local state = string.byte(v)
-- in flight, holder's token | complete -> Completed: completed until now + ttl.
if state == IN_FLIGHT then
  redis.call('SET', KEYS[1], COMPLETED_TAG .. string.sub(v, FINGERPRINT_FROM, TOKEN_TO) .. ARGV[3], 'PX', ARGV[2])
  -- traced for trace_ms after it expires (its fingerprint).
  if ARGV[5] ~= '0' then
    redis.call('SET', KEYS[2], string.sub(v, FINGERPRINT_FROM, FINGERPRINT_TO), 'PX', tonumber(ARGV[2]) + tonumber(ARGV[5]))
  end
  if ARGV[4] ~= '' then redis.call('PUBLISH', ARGV[4], KEYS[1]) end
  return 1
end
-- completed by the holder's token | complete -> Completed: first outcome kept.
if state == COMPLETED then return 1 end
-- anything else | complete -> LeaseLost (released by this token).
return 0
