-- release: KEYS[1] the record. ARGV[1] token.
-- Answers {'D', '0'} dropped, or {'F', current} fenced (current: the owner's token, '0' if none).
local rec = redis.call('HMGET', KEYS[1], 't', 'v')
if not rec[1] or rec[2] then
  return {'F', '0'}
end
if rec[1] ~= ARGV[1] then
  return {'F', rec[1]}
end
redis.call('DEL', KEYS[1])
return {'D', '0'}
