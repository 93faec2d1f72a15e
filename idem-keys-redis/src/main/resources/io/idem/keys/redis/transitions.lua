-- The store's transitions, run one after the other in one script (after the prelude): RedisKeyStore
-- sends each call as it comes while few scripts are in flight on its connection, and the calls
-- that arrive meanwhile together in the next script. A script is atomic, so a batch is too; each
-- transition in it decides exactly as it would alone, on the batch's one reading of TIME.
--
-- KEYS[1]: the namespace's token counter (never expires); then each transition's keys, in order.
-- ARGV: each transition as its code, the count of its arguments, then its arguments:
--   'A' acquire:  keys: the record (a string, below). Arguments: fingerprint, in-progress timeout ms,
--                 retention ms, attempt id.
--   'C' complete: keys: the record. Arguments: token, response.
--   'E' complete with an effect: keys: the record, the effect's key. Arguments: token, response,
--                 the effect's command (RPUSH, SET, INCRBY or HSET), its arguments after the key.
--   'R' release:  keys: the record. Arguments: token.
--   'N' renew:    keys: the record. Arguments: token, extension ms.
--   'S' show:     keys: the record. No arguments. Reads only.
--   'I' identify: no keys, no arguments: answers the node's id (CLUSTER MYID), so that a WAIT after
--                 the script goes to the node that ran it (RedisKeyStore on Redis Cluster).
-- Answers one reply per transition, in order, as its function below says; or {'X', error} if a
-- command it ran failed (its writes before the failure stay, as in any script; the transitions
-- after it still run).

-- Records: a string, packed (struct) as: a layout byte (OWNED 1: in progress, DONE 2: completed),
-- four big-endian doubles (token, deadline ms, retention ms, completion ms, 0 while in progress),
-- the fingerprint and the acquire's attempt id (each a 16-bit length and its bytes), and then, once
-- completed, the response to the end. One GET reads it and one SET ... PX writes it with its expiry:
-- a hash took HMGET, HSET and PEXPIRE, and cost Redis 15-29% more per keyed operation in the
-- keys bench (docs/PERFORMANCE.md, "Packed records"). Doubles hold every token and time exactly
-- (below 2^53).
local OWNED, DONE = 1, 2
local HEAD = '>BddddHc0Hc0'

local function pack(state, token, deadline, retention, completed, fingerprint, attempt)
  if #fingerprint > 65535 or #attempt > 65535 then
    error('ERR a fingerprint or attempt id longer than 65535 bytes does not fit a key record')
  end
  return struct.pack(HEAD, state, token, deadline, retention, completed, #fingerprint,
    fingerprint, #attempt, attempt)
end

-- The record's fields (state, token, deadline, retention, completed, fingerprint, attempt,
-- response: nil while in progress), or nothing if there is none. A record an earlier version wrote
-- as a hash (fields f, t, d, r, a, v, c) is read as well; the next write replaces it with a string.
local function read(record)
  local s = redis.pcall('GET', record)
  if not s then
    return nil
  end
  if type(s) == 'table' then
    if not (s.err and string.find(s.err, 'WRONGTYPE', 1, true)) then
      error(s)
    end
    local h = redis.call('HMGET', record, 'f', 't', 'd', 'r', 'a', 'v', 'c')
    if not h[2] then
      return nil
    end
    local state = h[6] and DONE or OWNED
    return state, tonumber(h[2]), tonumber(h[3]), tonumber(h[4]), tonumber(h[7] or '0'),
      h[1] or '', h[5] or '', h[6]
  end
  local state, token, deadline, retention, completed, fingerprint, attempt, at =
    struct.unpack(HEAD, s)
  if (state ~= OWNED and state ~= DONE) or token < 1 or retention < 1 then
    error('ERR ' .. record .. ' holds a string that is not a key record')
  end
  local response = nil
  if state == DONE then
    response = string.sub(s, at)
  end
  return state, token, deadline, retention, completed, fingerprint, attempt, response
end

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
  local state, token, deadline, _, _, fp, att, response = read(record)
  if state then
    if fp ~= fingerprint then
      return {'M'}
    end
    if state == DONE then
      return {'C', response}
    end
    if att == attempt then
      return {'A', int(token), int(deadline)} -- this very acquire, resent by the client after a
                                              -- lost answer
    end
    if deadline >= now_ms then
      return {'P', int(deadline)}
    end
  end
  -- A new record or a takeover. The token counts as drawn once a record holds it: a SET that
  -- fails (READONLY, OOM) leaves the counter as it was, and the batch's other answers stand.
  token = next_token()
  local timeout, retention = tonumber(timeout_ms), tonumber(retention_ms)
  deadline = now_ms + timeout
  redis.call('SET', record, pack(OWNED, token, deadline, retention, 0, fingerprint, attempt),
    'PX', timeout + retention)
  last = token
  drawn = true
  return {'A', int(token), int(deadline)}
end

-- complete: answers {'D', '0'} stored (and the effect applied), {'F', current} fenced (current: the
-- owner's token, '0' if none; nothing written), {'C', response} the key was already completed with
-- the stored response (nothing written), or {'E', error} the effect was refused (nothing written).
local function complete(record, token, response, effect_key, effect, arg1, arg2)
  local state, t, deadline, retention, _, fp, att, stored = read(record)
  if not state then
    return {'F', '0'}
  end
  local mine = t == tonumber(token)
  if state == DONE then
    if mine and stored == response then
      return {'D', '0'} -- this very completion, resent by the client after a lost answer: its
                        -- effect was applied with it, the first time, and is not applied again
    end
    return {'C', stored}
  end
  if not mine then
    return {'F', int(t)}
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
  -- The acquire's attempt id stays: an acquire that finds the record completed answers Completed
  -- before it looks at the attempt.
  redis.call('SET', record, pack(DONE, t, deadline, retention, now_ms, fp, att) .. response,
    'PX', retention)
  return {'D', '0'}
end

-- Whether token owns the key in progress: nil and the record's fields if it does; else the fenced
-- answer (current: the owner's token, '0' if none), or {'C', response} if the key is completed.
local function owned(record, token)
  local state, t, _, retention, _, fp, att, stored = read(record)
  if not state then
    return {'F', '0'}
  end
  if state == DONE then
    return {'C', stored}
  end
  if t ~= tonumber(token) then
    return {'F', int(t)}
  end
  return nil, t, retention, fp, att
end

-- release: answers {'D', '0'} dropped, or fenced (owned above).
local function release(record, token)
  local fenced = owned(record, token)
  if fenced then
    return fenced
  end
  redis.call('DEL', record)
  return {'D', '0'}
end

-- renew: answers {'D', deadline} renewed, or fenced (owned above).
local function renew(record, token, extension_ms)
  local fenced, t, retention, fp, att = owned(record, token)
  if fenced then
    return fenced
  end
  local extension = tonumber(extension_ms)
  local deadline = now_ms + extension
  redis.call('SET', record, pack(OWNED, t, deadline, retention, 0, fp, att),
    'PX', extension + retention)
  return {'D', int(deadline)}
end

-- show: answers {'0'} no record, or {'S', state ('P' in progress, 'C' completed), token, deadline,
-- retention, completed (0 while in progress), fingerprint, response ('' while in progress)}.
-- Reads only.
local function show(record)
  local state, t, deadline, retention, completed, fp, _, response = read(record)
  if not state then
    return {'0'}
  end
  return {'S', state == DONE and 'C' or 'P', int(t), int(deadline), int(retention),
    int(completed), fp, response or ''}
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
  elseif code == 'S' then ok = n == 0
  elseif code == 'I' then ok = n == 0; keys_needed = keys_needed - 1
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
  elseif code == 'N' then
    ok, reply = pcall(renew, KEYS[k], ARGV[a], ARGV[a + 1])
    k = k + 1
  elseif code == 'I' then
    ok, reply = pcall(redis.call, 'CLUSTER', 'MYID')
  else
    ok, reply = pcall(show, KEYS[k])
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
