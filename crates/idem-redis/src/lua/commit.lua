-- commit(token, ttl_ms, outcome, channel, n_reads, expected..., writes...,
-- trace_ms)
-- A transaction's writes and its record's completion, applied together and
-- only while the claim holds and what the transaction read is unchanged.
-- KEYS[1 .. 3] are the claim's keys (key_layout.rs: the record under the
-- layout this store writes, its trace key, the hex key); KEYS[4 .. 3+n] the
-- keys read, with ARGV[6 .. 5+n] what was read ('-' absent, '=' .. value);
-- KEYS[4+n ..] the keys written, with ARGV[6+n ..] the writes ('S' ..
-- value to set, 'D' to delete); the record is traced ARGV[#ARGV] ms after
-- its replay ends (as complete.lua does it).
-- Replies 1 committed, 2 committed before by this token (nothing applied
-- again), 0 the claim is lost (nothing applied), {3, i} the i-th read
-- changed (nothing applied). The record's layout is in begin.lua; each
-- branch names its row of idem_core::machine's table.
local SET = 83
local key = KEYS[1]
local v = redis.call('GET', key)
-- anything else | complete -> LeaseLost: nothing applied.
if not v or string.sub(v, TOKEN_FROM, TOKEN_TO) ~= ARGV[1] then return 0 end
local state = string.byte(v)
-- completed by the holder's token | complete -> Completed: a resent commit,
-- nothing applied again.
if state == COMPLETED or (state == TRACED and replay_left(key, v) > 0) then return 2 end
if state ~= IN_FLIGHT then return 0 end
local n = tonumber(ARGV[5])
for i = 1, n do
  local now = redis.call('GET', KEYS[3 + i])
  local was = ARGV[5 + i]
  if was == '-' then
    if now then return {3, i} end
  elseif not now or now ~= string.sub(was, 2) then
    return {3, i}
  end
end
for i = 4 + n, #KEYS do
  local write = ARGV[i + 2]
  if string.byte(write) == SET then
    redis.call('SET', KEYS[i], string.sub(write, 2))
  else
    redis.call('DEL', KEYS[i])
  end
end
-- in flight, holder's token | complete -> Completed, with the writes.
local trace_ms = ARGV[#ARGV]
if trace_ms ~= '0' then
  redis.call('SET', key, TRACED_TAG .. string.sub(v, FINGERPRINT_FROM, TOKEN_TO) .. trace_ms .. ARGV[3], 'PX', ARGV[2] + trace_ms)
else
  redis.call('SET', key, COMPLETED_TAG .. string.sub(v, FINGERPRINT_FROM, TOKEN_TO) .. ARGV[3], 'PX', ARGV[2])
end
if ARGV[4] ~= '' then redis.call('PUBLISH', ARGV[4], KEYS[3]) end
return 1
