local t = redis.call('TIME')
local us = t[2]
local now = t[1] .. string.rep('0', 6 - #us) .. us
if redis.call('SET', KEYS[1], 'F' .. ARGV[1] .. now, 'NX', 'PX', ARGV[2]) then
  return now
end
local v = redis.call('GET', KEYS[1])
if not v or #v < 49 then error('idem: corrupt record') end
local state = string.byte(v)
if state ~= 82 then
  if string.sub(v, 2, 33) ~= ARGV[1] then return {'M'} end
  if state == 70 then return {'I', redis.call('PTTL', KEYS[1])} end
  if state == 67 then return {'R', string.sub(v, 50)} end
  error('idem: corrupt record')
end
local token = string.format('%016.0f', math.max(tonumber(string.sub(v, 34, 49)) + 1, tonumber(now)))
redis.call('SET', KEYS[1], 'F' .. ARGV[1] .. token, 'PX', ARGV[2])
return token
