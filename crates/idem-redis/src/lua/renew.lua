-- renew(token, lease_ms), on the record's four keys (key_layout.rs; layout
-- in begin.lua). Replies 1 renewed, 0 the claim is lost.
local key, _, v = find()
-- anything else | renew -> LeaseLost.
if not v or string.byte(v) ~= IN_FLIGHT or string.sub(v, TOKEN_FROM, TOKEN_TO) ~= ARGV[1] then return 0 end
-- in flight, holder's token | renew -> Renewed: lease until now + duration.
redis.call('PEXPIRE', key, ARGV[2])
return 1
