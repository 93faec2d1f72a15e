-- complete: KEYS[1] the record; with an effect, KEYS[2] the effect's key. ARGV[1] token, ARGV[2]
-- response; with an effect, ARGV[3] its command (RPUSH, SET, INCRBY or HSET) and ARGV[4..] its
-- arguments after the key.
-- Answers {'D', '0'} stored (and the effect applied), {'F', current} fenced (current: the owner's
-- token, '0' if none; nothing written), or {'E', error} the effect was refused (nothing written).
local rec = redis.call('HMGET', KEYS[1], 't', 'v', 'r')
if not rec[1] then
  return {'F', '0'}
end
if rec[2] then
  if rec[1] == ARGV[1] and rec[2] == ARGV[2] then
    return {'D', '0'} -- this very completion, resent by the client after a lost answer: its
                      -- effect was applied with it, the first time, and is not applied again
  end
  return {'F', '0'}
end
if rec[1] ~= ARGV[1] then
  return {'F', rec[1]}
end
-- The effect first: a script is atomic but not rolled back, so the only command that can fail
-- (WRONGTYPE, not an integer) runs before anything is written, and a failure leaves no trace.
local effect = ARGV[3]
if effect then
  local done
  if effect == 'HSET' then
    done = redis.pcall('HSET', KEYS[2], ARGV[4], ARGV[5])
  elseif effect == 'RPUSH' or effect == 'SET' or effect == 'INCRBY' then
    done = redis.pcall(effect, KEYS[2], ARGV[4])
  else
    return {'E', 'unknown effect ' .. effect}
  end
  if type(done) == 'table' and done.err then
    return {'E', done.err}
  end
end
-- The acquire's attempt id 'a' stays: an acquire that finds 'v' answers Completed before it
-- looks at 'a', so deleting it would cost a command (and an AOF entry) for nothing.
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'c', int(now_ms))
redis.call('PEXPIRE', KEYS[1], tonumber(rec[3]))
return {'D', '0'}
