-- renew(token, lease_ms), on KEYS[1], the record (layout in begin.lua).
-- Replies 1 renewed, 0 the claim is lost.
local v = redis.call('GET', KEYS[1])
-- anything else | renew -> LeaseLost.
if not v or string.byte(v) ~= IN_FLIGHT or string.sub(v, TOKEN_FROM, TOKEN_TO) ~= ARGV[1] then return 0 end
-- in flight, holder's token | renew -> Renewed: lease until now + duration.
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
