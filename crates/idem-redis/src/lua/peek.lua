-- peek(fingerprint, durable), on the record's four keys (key_layout.rs;
-- layout in begin.lua): begin's answers for an existing record, for a
-- server that refused begin's claim because it is full (over maxmemory
-- under noeviction). It writes nothing that needs memory, so the full
-- server still answers retries of the work it recorded. Replies 0 (no live
-- record: a new key, which a full server cannot take), or begin's tagged
-- answers.
local key, v, trace_key, trace = look()
if not v then
  -- expired, traced | begin -> Expired (same fingerprint) or Mismatch.
  if not trace then return 0 end
  return traced(trace, trace_key, ARGV[1], ARGV[2])
end
local state = string.byte(v)
refuse_newer(state)
if #v < LEAST then error('idem: corrupt record') end
if state == RELEASED then return 0 end
-- As in begin: with durable '1', the answer is made this connection's own
-- write (the expiry set to what it is), so that the WAIT after it covers
-- the record. PEXPIREAT is not refused on a full server.
if ARGV[2] == '1' then
  local at = redis.call('PEXPIRETIME', key)
  if at > 0 then redis.call('PEXPIREAT', key, at) end
end
-- in flight or completed, other fingerprint | begin -> Mismatch.
if string.sub(v, FINGERPRINT_FROM, FINGERPRINT_TO) ~= ARGV[1] then return {'M'} end
-- in flight, same fingerprint | begin -> InFlight { retry_after }.
if state == IN_FLIGHT then return {'I', redis.call('PTTL', key)} end
-- completed, same fingerprint | begin -> Replay(outcome).
if state == COMPLETED then return {'R', string.sub(v, OUTCOME_FROM)} end
error('idem: corrupt record')
