#!lua flags=allow-oom
-- complete(token, ttl_ms, outcome, channel, trace_ms), on the claim's keys
-- (key_layout.rs: KEYS[1] the record under the layout this store writes,
-- KEYS[2] its trace key, KEYS[3] with compact keys the hex key); the
-- record's layout is in begin.lua. Replies 1 completed (now, or before by
-- this token), 0 the claim is lost. Each branch names its row of
-- idem_core::machine's table.
local key = KEYS[1]
local v = redis.call('GET', key)
-- anything else | complete -> LeaseLost (no live record, another token).
if not v or string.sub(v, TOKEN_FROM, TOKEN_TO) ~= ARGV[1] then return 0 end
local state = string.byte(v)
-- in flight, holder's token | complete -> Completed: completed until now +
-- ttl; with a trace (trace_ms, 13 digits), one key that carries it
-- (TRACED): replayed for ttl, then refused as expired for trace_ms more.
if state == IN_FLIGHT then
  if ARGV[5] ~= '0' then
    redis.call('SET', key, TRACED_TAG .. string.sub(v, FINGERPRINT_FROM, TOKEN_TO) .. ARGV[5] .. ARGV[3], 'PX', ARGV[2] + ARGV[5])
  else
    redis.call('SET', key, COMPLETED_TAG .. string.sub(v, FINGERPRINT_FROM, TOKEN_TO) .. ARGV[3], 'PX', ARGV[2])
  end
  if ARGV[4] ~= '' then redis.call('PUBLISH', ARGV[4], wake_key()) end
  return 1
end
-- completed by the holder's token | complete -> Completed: first outcome
-- kept. (A traced record past its replay is expired: below.)
if state == COMPLETED or (state == TRACED and replay_left(key, v) > 0) then return 1 end
-- anything else | complete -> LeaseLost (released by this token, or
-- expired: only its trace is left).
return 0
