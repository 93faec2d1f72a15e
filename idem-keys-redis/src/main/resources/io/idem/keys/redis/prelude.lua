-- Prepended to every key script by RedisKeyStore. Time is the Redis server's (TIME), never the
-- application host's. Lua numbers are doubles: integers are exact below 2^53, which holds for
-- milliseconds and for microseconds since 1970 until the year 2255; int() writes them as plain
-- decimal text (tostring would switch to exponent notation past 14 digits).
if redis.replicate_commands then
  redis.replicate_commands() -- Redis < 5: replicate the writes, not the script that read TIME
end
local time = redis.call('TIME')
local now_us = tonumber(time[1]) * 1000000 + tonumber(time[2])
local now_ms = math.floor(now_us / 1000)
local function int(n)
  return string.format('%d', n)
end
