-- begin(fingerprint, lease_ms, want_ttl, durable), on the record's four
-- keys (key_layout.rs): KEYS[1] where this store writes it, KEYS[2] its
-- trace key (written by the version before: the fingerprint of a
-- completed record, kept after the record expires), KEYS[3] and KEYS[4]
-- the other layout's; `look` reads all four in one MGET.
-- The record is one string: state (IN_FLIGHT, COMPLETED, RELEASED, or
-- TRACED: completed, carrying its own trace), fingerprint, fencing token
-- (16 digits), then the outcome of a completed record (a traced record's
-- after its trace's length); its layout's names come before every script,
-- from value_layout.rs.
-- The key expires with the lease (in flight), the TTL (completed) or the
-- TTL and the trace (traced), so a record that is not live is a missing
-- key (or 'R', kept 1 ms, or a traced record past its replay).
-- Each branch names its row of idem_core::machine's table.
local function clock()
  local t = redis.call('TIME')
  local us = t[2]
  return t[1] .. string.rep('0', 6 - #us) .. us
end
local key, v, trace_key, trace = look()
if not v then
  -- expired, traced | begin -> Expired (same fingerprint) or Mismatch.
  if trace then return traced(trace, trace_key, ARGV[1], ARGV[4]) end
  -- none | begin -> Acquired: put in flight, token from the clock.
  local now = clock()
  redis.call('SET', KEYS[1], IN_FLIGHT_TAG .. ARGV[1] .. now, 'PX', ARGV[2])
  return now
end
-- With durable '1', an answer read from the record is made a write of this
-- connection's own (`existing`), so that the WAIT after it covers the
-- record: Redis 7.2+ and Valkey wait only for a connection's last write,
-- and a read alone would let a replay be served from a record not yet on
-- any replica. The key's expiry is set to what it is: nothing changes.
-- in flight or completed, other fingerprint | begin -> Mismatch.
-- in flight, same fingerprint | begin -> InFlight { retry_after }.
-- completed, same fingerprint | begin -> Replay(outcome); with want_ttl
-- '1', its time left too (for the replay cache).
-- expired, traced (a traced record past its replay) | begin -> Expired.
-- A record of a newer format (another first byte) is not misread.
if string.byte(v) ~= RELEASED then return existing(key, v, ARGV[1], ARGV[4], ARGV[3]) end
if #v < LEAST then error('idem: corrupt record') end
-- none (released, not live) | begin -> Acquired: token max(previous + 1,
-- now), under the written layout's key.
local token = string.format('%016.0f', math.max(tonumber(string.sub(v, TOKEN_FROM, TOKEN_TO)) + 1, tonumber(clock())))
redis.call('SET', KEYS[1], IN_FLIGHT_TAG .. ARGV[1] .. token, 'PX', ARGV[2])
return token
