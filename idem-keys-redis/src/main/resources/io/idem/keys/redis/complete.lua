-- complete: KEYS[1] the record. ARGV[1] token, ARGV[2] response.
-- Answers {'D', '0'} stored, or {'F', current} fenced (current: the owner's token, '0' if none).
local rec = redis.call('HMGET', KEYS[1], 't', 'v', 'r')
if not rec[1] then
  return {'F', '0'}
end
if rec[2] then
  if rec[1] == ARGV[1] and rec[2] == ARGV[2] then
    return {'D', '0'} -- this very completion, resent by the client after a lost answer
  end
  return {'F', '0'}
end
if rec[1] ~= ARGV[1] then
  return {'F', rec[1]}
end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'c', int(now_ms))
redis.call('HDEL', KEYS[1], 'a')
redis.call('PEXPIRE', KEYS[1], tonumber(rec[3]))
return {'D', '0'}
