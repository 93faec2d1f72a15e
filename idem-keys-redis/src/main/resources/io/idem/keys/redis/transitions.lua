-- The store's transitions, run one after the other in one script (after the prelude): RedisKeyStore
-- sends each call as it comes while few scripts are in flight on its connection, and the calls
-- that arrive meanwhile together in the next script. A script is atomic, so a batch is too; each
-- transition in it decides exactly as it would alone, on the batch's one reading of TIME.
--
-- KEYS[1]: the namespace's token counter (never expires); then each transition's keys, in order.
-- ARGV: each transition as its code, the count of its arguments, then its arguments:
--   'A' acquire:  keys: the record (a hash). Arguments: fingerprint, in-progress timeout ms,
--                 retention ms, attempt id.
--   'C' complete: keys: the record. Arguments: token, response.
--   'E' complete with an effect: keys: the record, the effect's key. Arguments: token, response,
--                 the effect's command (RPUSH, SET, INCRBY or HSET), its arguments after the key.
--   'R' release:  keys: the record. Arguments: token.
--   'N' renew:    keys: the record. Arguments: token, extension ms.
-- Answers one reply per transition, in order, as its function below says; or {'X', error} if a
-- command it ran failed (its writes before the failure stay, as in any script; the transitions
-- after it still run).

-- Tokens: above every token the namespace handed out (the counter) and, should the counter have
-- been lost with the tail of the AOF, above the server's clock in microseconds, which was above
-- every token handed out before: tokens never repeat. The counter is read once per script, at the
-- first acquire that needs it, and written once at its end if a record took a token.
local last = nil
local drawn = false
local function next_token()
  if not last then
    last = tonumber(redis.call('GET', KEYS[1]) or '0')
  end
  return math.max(last + 1, now_us)
end

-- acquire: answers {'M'} mismatch, {'C', response} completed, {'P', deadline} in progress, or
-- {'A', token, deadline} acquired.
local function acquire(record, fingerprint, timeout_ms, retention_ms, attempt)
  local rec = redis.call('HMGET', record, 'f', 't', 'd', 'v', 'a')
  if rec[1] then
    if rec[1] ~= fingerprint then
      return {'M'}
    end
    if rec[4] then
      return {'C', rec[4]}
    end
    if rec[5] == attempt then
      return {'A', rec[2], rec[3]} -- this very acquire, resent by the client after a lost answer
    end
    if tonumber(rec[3]) >= now_ms then
      return {'P', rec[3]}
    end
  end
  -- A new record or a takeover. The token counts as drawn once a record holds it: an HSET that
  -- fails (READONLY, OOM) leaves the counter as it was, and the batch's other answers stand.
  local token = next_token()
  local timeout = tonumber(timeout_ms)
  local deadline = now_ms + timeout
  redis.call('HSET', record, 'f', fingerprint, 't', int(token), 'd', int(deadline),
    'r', retention_ms, 'a', attempt)
  last = token
  drawn = true
  redis.call('PEXPIRE', record, timeout + tonumber(retention_ms))
  return {'A', int(token), int(deadline)}
end

-- complete: answers {'D', '0'} stored (and the effect applied), {'F', current} fenced (current: the
-- owner's token, '0' if none; nothing written), or {'E', error} the effect was refused (nothing
-- written).
local function complete(record, token, response, effect_key, effect, arg1, arg2)
  local rec = redis.call('HMGET', record, 't', 'v', 'r')
  if not rec[1] then
    return {'F', '0'}
  end
  if rec[2] then
    if rec[1] == token and rec[2] == response then
      return {'D', '0'} -- this very completion, resent by the client after a lost answer: its
                        -- effect was applied with it, the first time, and is not applied again
    end
    return {'F', '0'}
  end
  if rec[1] ~= token then
    return {'F', rec[1]}
  end
  -- The effect first: a script is atomic but not rolled back, so the only command that can fail
  -- (WRONGTYPE, not an integer) runs before anything is written, and a failure leaves no trace.
  if effect then
    local done
    if effect == 'HSET' then
      done = redis.pcall('HSET', effect_key, arg1, arg2)
    elseif effect == 'RPUSH' or effect == 'SET' or effect == 'INCRBY' then
      done = redis.pcall(effect, effect_key, arg1)
    else
      return {'E', 'unknown effect ' .. effect}
    end
    if type(done) == 'table' and done.err then
      return {'E', done.err}
    end
  end
  -- The acquire's attempt id 'a' stays: an acquire that finds 'v' answers Completed before it
  -- looks at 'a', so deleting it would cost a command (and an AOF entry) for nothing.
  redis.call('HSET', record, 'v', response, 'c', int(now_ms))
  redis.call('PEXPIRE', record, tonumber(rec[3]))
  return {'D', '0'}
end

-- The record ('t', 'v', 'r') if token owns the key in progress; else nil and the fenced answer
-- (current: the owner's token, '0' if none).
local function owned(record, token)
  local rec = redis.call('HMGET', record, 't', 'v', 'r')
  if not rec[1] or rec[2] then
    return nil, {'F', '0'}
  end
  if rec[1] ~= token then
    return nil, {'F', rec[1]}
  end
  return rec
end

-- release: answers {'D', '0'} dropped, or fenced (owned above).
local function release(record, token)
  local rec, fenced = owned(record, token)
  if not rec then
    return fenced
  end
  redis.call('DEL', record)
  return {'D', '0'}
end

-- renew: answers {'D', deadline} renewed, or fenced (owned above).
local function renew(record, token, extension_ms)
  local rec, fenced = owned(record, token)
  if not rec then
    return fenced
  end
  local extension = tonumber(extension_ms)
  local deadline = now_ms + extension
  redis.call('HSET', record, 'd', int(deadline))
  redis.call('PEXPIRE', record, extension + tonumber(rec[3]))
  return {'D', int(deadline)}
end

-- The layout is checked whole before anything runs, so that a malformed batch writes nothing.
local n_args = #ARGV
local keys_needed, at = 1, 1
while at <= n_args do
  local code, n = ARGV[at], tonumber(ARGV[at + 1])
  local ok
  if code == 'A' then ok = n == 4
  elseif code == 'C' then ok = n == 2
  elseif code == 'E' then ok = n == 4 or n == 5; keys_needed = keys_needed + 1
  elseif code == 'R' then ok = n == 1
  elseif code == 'N' then ok = n == 2
  end
  if not ok or at + 1 + n > n_args then
    return redis.error_reply('ERR malformed batch at argument ' .. at)
  end
  keys_needed = keys_needed + 1
  at = at + 2 + n
end
if keys_needed ~= #KEYS then
  return redis.error_reply('ERR malformed batch: ' .. #KEYS .. ' keys for ' .. keys_needed)
end

local out = {}
local k = 2
at = 1
while at <= n_args do
  local code, n = ARGV[at], tonumber(ARGV[at + 1])
  local a = at + 2
  local ok, reply
  if code == 'A' then
    ok, reply = pcall(acquire, KEYS[k], ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3])
    k = k + 1
  elseif code == 'C' then
    ok, reply = pcall(complete, KEYS[k], ARGV[a], ARGV[a + 1])
    k = k + 1
  elseif code == 'E' then
    local arg2 = nil
    if n == 5 then
      arg2 = ARGV[a + 4] -- HSET's value
    end
    ok, reply = pcall(complete, KEYS[k], ARGV[a], ARGV[a + 1], KEYS[k + 1], ARGV[a + 2],
      ARGV[a + 3], arg2)
    k = k + 2
  elseif code == 'R' then
    ok, reply = pcall(release, KEYS[k], ARGV[a])
    k = k + 1
  else
    ok, reply = pcall(renew, KEYS[k], ARGV[a], ARGV[a + 1])
    k = k + 1
  end
  if not ok then
    if type(reply) == 'table' and reply.err then
      reply = reply.err
    end
    reply = {'X', tostring(reply)}
  end
  out[#out + 1] = reply
  at = a + n
end
if drawn then
  redis.call('SET', KEYS[1], int(last))
end
return out
