-- renew: KEYS[1] the record. ARGV[1] token, ARGV[2] extension ms.
-- Answers {'D', deadline} renewed, or {'F', current} fenced (current: the owner's token, '0' if
-- none).
local rec = redis.call('HMGET', KEYS[1], 't', 'v', 'r')
if not rec[1] or rec[2] then
  return {'F', '0'}
end
if rec[1] ~= ARGV[1] then
  return {'F', rec[1]}
end
local extension = tonumber(ARGV[2])
local deadline = now_ms + extension
redis.call('HSET', KEYS[1], 'd', int(deadline))
redis.call('PEXPIRE', KEYS[1], extension + tonumber(rec[3]))
return {'D', int(deadline)}
