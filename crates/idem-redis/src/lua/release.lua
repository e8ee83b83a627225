#!lua flags=allow-oom
-- release(token, channel), on KEYS[1], the record (layout in begin.lua).
-- Replies 1 released, 0 the claim is lost.
local v = redis.call('GET', KEYS[1])
-- anything else | release -> LeaseLost.
if not v or string.byte(v) ~= IN_FLIGHT or string.sub(v, TOKEN_FROM, TOKEN_TO) ~= ARGV[1] then return 0 end
-- in flight, holder's token | release -> Released: the lease ends now. The
-- record stays 1 ms as released ('R'), so that a claim in that time draws
-- its token above this one.
redis.call('SET', KEYS[1], RELEASED_TAG .. string.sub(v, FINGERPRINT_FROM, TOKEN_TO), 'PX', 1)
if ARGV[2] ~= '' then redis.call('PUBLISH', ARGV[2], KEYS[1]) end
return 1
