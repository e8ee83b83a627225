#!lua flags=allow-oom
-- release(token, channel), on KEYS[1], the record (layout in begin.lua).
-- Replies 1 released, 0 the claim is lost.
local IN_FLIGHT = 70
local v = redis.call('GET', KEYS[1])
-- anything else | release -> LeaseLost.
if not v or string.byte(v) ~= IN_FLIGHT or string.sub(v, 34, 49) ~= ARGV[1] then return 0 end
-- in flight, holder's token | release -> Released: the lease ends now. The
-- record stays 1 ms as released ('R'), so that a claim in that time draws
-- its token above this one.
redis.call('SET', KEYS[1], 'R' .. string.sub(v, 2, 49), 'PX', 1)
if ARGV[2] ~= '' then redis.call('PUBLISH', ARGV[2], KEYS[1]) end
return 1
