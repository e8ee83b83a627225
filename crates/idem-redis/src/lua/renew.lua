-- renew(token, lease_ms), on KEYS[1], the record (layout in begin.lua).
-- Replies 1 renewed, 0 the claim is lost.
local IN_FLIGHT = 70
local v = redis.call('GET', KEYS[1])
-- anything else | renew -> LeaseLost.
if not v or string.byte(v) ~= IN_FLIGHT or string.sub(v, 34, 49) ~= ARGV[1] then return 0 end
-- in flight, holder's token | renew -> Renewed: lease until now + duration.
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
