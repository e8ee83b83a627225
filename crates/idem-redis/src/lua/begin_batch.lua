-- begin.lua for each record of a batch (batch.rs; a call for one record
-- runs begin.lua itself): KEYS are each record's four keys
-- (key_layout.rs: KEYS[1] where this store writes it, KEYS[2] its trace
-- key, written by the version before: the fingerprint of a completed
-- record, kept after the record expires; KEYS[3] and KEYS[4] the other
-- layout's), record after record; ARGV each record's four arguments. All
-- of them are read in one MGET, and the clock at most once. Replies one
-- answer per record, in order, as begin.lua would answer it alone (a fresh
-- claim's token as a string, every other answer a tagged array), an error
-- a record raised as {'!', error} (it raised before writing anything, and
-- the other records are answered as if it had not been asked). Each
-- record's branches are begin.lua's, in the same order.
-- The record is one string: state (IN_FLIGHT, COMPLETED, RELEASED, or
-- TRACED: completed, carrying its own trace), fingerprint, fencing token
-- (16 digits), then the outcome of a completed record (a traced record's
-- after its trace's length); its layout's names come before every script,
-- from value_layout.rs.
-- The key expires with the lease (in flight), the TTL (completed) or the
-- TTL and the trace (traced), so a record that is not live is a missing
-- key (or 'R', kept 1 ms, or a traced record past its replay).
-- Each branch names its row of idem_core::machine's table.
local values = redis.call('MGET', unpack(KEYS))
-- What this call wrote: a record asked for twice in one batch is in
-- flight for the second asking, as it would be in two calls.
local written = {}
local function read(at)
  return written[KEYS[at]] or values[at]
end
local now
local function clock()
  if not now then
    local t = redis.call('TIME')
    now = t[1] .. string.rep('0', 6 - #t[2]) .. t[2]
  end
  return now
end
local function claim(k, fingerprint, lease_ms, token)
  local v = IN_FLIGHT_TAG .. fingerprint .. token
  redis.call('SET', KEYS[k + 1], v, 'PX', lease_ms)
  written[KEYS[k + 1]] = v
  return token
end
-- The record whose keys follow KEYS[k], with the arguments after ARGV[a].
local function begin(k, a)
  local fingerprint, lease_ms, want_ttl, durable = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  local key, v = KEYS[k + 1], read(k + 1)
  if not v then key, v = KEYS[k + 3], read(k + 3) end
  if not v then
    -- expired, traced | begin -> Expired (same fingerprint) or Mismatch.
    if read(k + 2) then return traced(read(k + 2), KEYS[k + 2], fingerprint, durable) end
    if read(k + 4) then return traced(read(k + 4), KEYS[k + 4], fingerprint, durable) end
    -- none | begin -> Acquired: put in flight, token from the clock.
    return claim(k, fingerprint, lease_ms, clock())
  end
  -- With durable '1', an answer read from the record is made a write of
  -- this connection's own (`existing`), so that the WAIT after it covers
  -- the record: Redis 7.2+ and Valkey wait only for a connection's last
  -- write, and a read alone would let a replay be served from a record not
  -- yet on any replica. The key's expiry is set to what it is: nothing
  -- changes.
  -- in flight or completed, other fingerprint | begin -> Mismatch.
  -- in flight, same fingerprint | begin -> InFlight { retry_after }.
  -- completed, same fingerprint | begin -> Replay(outcome); with want_ttl
  -- '1', its time left too (for the replay cache).
  -- expired, traced (a traced record past its replay) | begin -> Expired.
  -- A record of a newer format (another first byte) is not misread.
  if string.byte(v) ~= RELEASED then return existing(key, v, fingerprint, durable, want_ttl) end
  if #v < LEAST then error('idem: corrupt record') end
  -- none (released, not live) | begin -> Acquired: token max(previous + 1,
  -- now), under the written layout's key.
  local token = string.format('%016.0f', math.max(tonumber(string.sub(v, TOKEN_FROM, TOKEN_TO)) + 1, tonumber(clock())))
  return claim(k, fingerprint, lease_ms, token)
end
return answer_each(#KEYS / 4, function(i) return begin(i * 4, i * 4) end)
