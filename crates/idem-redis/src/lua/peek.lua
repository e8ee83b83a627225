-- peek(fingerprint, durable), on the record's four keys (key_layout.rs;
-- layout in begin.lua): begin's answers for an existing record, for a
-- server that refused begin's claim because it is full (over maxmemory
-- under noeviction). It writes nothing that needs memory, so the full
-- server still answers retries of the work it recorded (as in begin, with
-- durable '1' an answer is made this connection's own write by setting
-- the expiry to what it is: PEXPIREAT is not refused on a full server).
-- Replies 0 (no live record: a new key, which a full server cannot take),
-- or begin's tagged answers.
local key, v, trace_key, trace = look()
if not v then
  -- expired, traced | begin -> Expired (same fingerprint) or Mismatch.
  if not trace then return 0 end
  return traced(trace, trace_key, ARGV[1], ARGV[2])
end
if string.byte(v) == RELEASED then return 0 end
-- Mismatch, InFlight, Replay or Expired, as begin answers them.
return existing(key, v, ARGV[1], ARGV[2], '')
