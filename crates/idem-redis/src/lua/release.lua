#!lua flags=allow-oom
-- release(token, channel), on the claim's keys (key_layout.rs: KEYS[1] the record under the layout
-- this store writes, KEYS[2] its trace, KEYS[3] with compact keys the hex key);
-- the record's layout is in begin.lua. Replies 1 released, 0 the claim is
-- lost.
local key = KEYS[1]
local v = redis.call('GET', key)
-- anything else | release -> LeaseLost.
if not v or string.byte(v) ~= IN_FLIGHT or string.sub(v, TOKEN_FROM, TOKEN_TO) ~= ARGV[1] then return 0 end
-- in flight, holder's token | release -> Released: the lease ends now. The
-- record stays 1 ms as released ('R'), so that a claim in that time draws
-- its token above this one.
redis.call('SET', key, RELEASED_TAG .. string.sub(v, FINGERPRINT_FROM, TOKEN_TO), 'PX', 1)
if ARGV[2] ~= '' then redis.call('PUBLISH', ARGV[2], wake_key()) end
return 1
