#!lua flags=allow-oom
-- complete.lua for each claim of a batch (batch.rs; a call for one claim
-- runs complete.lua itself): KEYS are each claim's three keys
-- (key_layout.rs, HolderKeys::three: the record under the layout this
-- store writes, its trace key, the hex key, which wake-ups name), claim
-- after claim; ARGV each claim's five arguments. The records are read in
-- one MGET. Replies one answer per claim, in order, as complete.lua would
-- answer it alone (1 completed, now or before by this token; 0 the claim
-- is lost), an error a claim raised as {'!', error} (before writing
-- anything). Each claim's branches are complete.lua's, in the same order. The record's layout is in begin.lua.
-- Each branch names its row of idem_core::machine's table.
local records = {}
for i = 1, #KEYS, 3 do records[#records + 1] = KEYS[i] end
local values = redis.call('MGET', unpack(records))
-- What this call wrote: a claim completed twice in one batch finds the
-- first completion, as it would in two calls.
local written = {}
local function complete(i)
  local key, hex = KEYS[i * 3 + 1], KEYS[i * 3 + 3]
  local token, ttl_ms, outcome, channel, trace_ms = ARGV[i * 5 + 1], ARGV[i * 5 + 2], ARGV[i * 5 + 3], ARGV[i * 5 + 4], ARGV[i * 5 + 5]
  local v = written[key] or values[i + 1]
  -- anything else | complete -> LeaseLost (no live record, another token).
  if not v or string.sub(v, TOKEN_FROM, TOKEN_TO) ~= token then return 0 end
  local state = string.byte(v)
  -- in flight, holder's token | complete -> Completed: completed until now
  -- + ttl; with a trace (trace_ms, 13 digits), one key that carries it
  -- (TRACED): replayed for ttl, then refused as expired for trace_ms more.
  if state == IN_FLIGHT then
    local record
    if trace_ms ~= '0' then
      record = TRACED_TAG .. string.sub(v, FINGERPRINT_FROM, TOKEN_TO) .. trace_ms .. outcome
      redis.call('SET', key, record, 'PX', ttl_ms + trace_ms)
    else
      record = COMPLETED_TAG .. string.sub(v, FINGERPRINT_FROM, TOKEN_TO) .. outcome
      redis.call('SET', key, record, 'PX', ttl_ms)
    end
    written[key] = record
    if channel ~= '' then redis.call('PUBLISH', channel, hex) end
    return 1
  end
  -- completed by the holder's token | complete -> Completed: first outcome
  -- kept. (A traced record past its replay is expired: below.)
  if state == COMPLETED or (state == TRACED and replay_left(key, v) > 0) then return 1 end
  -- anything else | complete -> LeaseLost (released by this token, or
  -- expired: only its trace is left).
  return 0
end
return answer_each(#records, complete)
