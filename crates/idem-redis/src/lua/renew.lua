-- renew(token, lease_ms), on the claim's keys (key_layout.rs: KEYS[1] the record under the layout
-- this store writes, KEYS[2] its trace, KEYS[3] with compact keys the hex key);
-- the record's layout is in begin.lua. Replies 1 renewed, 0 the claim is
-- lost.
local key = KEYS[1]
local v = redis.call('GET', key)
-- anything else | renew -> LeaseLost.
if not v or string.byte(v) ~= IN_FLIGHT or string.sub(v, TOKEN_FROM, TOKEN_TO) ~= ARGV[1] then return 0 end
-- in flight, holder's token | renew -> Renewed: lease until now + duration.
redis.call('PEXPIRE', key, ARGV[2])
return 1
