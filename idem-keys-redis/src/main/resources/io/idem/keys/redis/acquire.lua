-- acquire: KEYS[1] the record (a hash), KEYS[2] the namespace's token counter (never expires).
-- ARGV[1] fingerprint, ARGV[2] in-progress timeout ms, ARGV[3] retention ms, ARGV[4] attempt id.
-- Answers {'M'} mismatch, {'C', response} completed, {'P', deadline} in progress, or
-- {'A', token, deadline} acquired.
local rec = redis.call('HMGET', KEYS[1], 'f', 't', 'd', 'v', 'a')
if rec[1] then
  if rec[1] ~= ARGV[1] then
    return {'M'}
  end
  if rec[4] then
    return {'C', rec[4]}
  end
  if rec[5] == ARGV[4] then
    return {'A', rec[2], rec[3]} -- this very acquire, resent by the client after a lost answer
  end
  if tonumber(rec[3]) >= now_ms then
    return {'P', rec[3]}
  end
end
-- A new record or a takeover. The token is above every token the namespace handed out (the
-- counter) and, should the counter have been lost with the tail of the AOF, above the server's
-- clock in microseconds, which was above every token handed out before: tokens never repeat.
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
local token = math.max(last + 1, now_us)
local timeout = tonumber(ARGV[2])
local retention = tonumber(ARGV[3])
local deadline = now_ms + timeout
redis.call('SET', KEYS[2], int(token))
redis.call('HSET', KEYS[1], 'f', ARGV[1], 't', int(token), 'd', int(deadline), 'r', ARGV[3],
  'a', ARGV[4])
redis.call('PEXPIRE', KEYS[1], timeout + retention)
return {'A', int(token), int(deadline)}
