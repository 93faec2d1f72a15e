-- wrk script: POST a withdrawal with a new Idempotency-Key on every request (an RFC 8941 string:
-- start time, thread number and a counter), so every request is a first call, never a replay.
-- Usage: wrk -t2 -c64 -d30s --latency -s bench/idempotent-post.lua http://127.0.0.1:8080
-- Set WRK_PATH to change the target (default /accounts/alice/withdrawals).
local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end

local prefix
local counter = 0
local path = os.getenv("WRK_PATH") or "/accounts/alice/withdrawals"
local keyed = os.getenv("WRK_NO_KEY") == nil

function init(args)
  prefix = string.format("%d-%d", os.time(), tid or 0)
end

function request()
  counter = counter + 1
  local headers = { ["Content-Type"] = "application/json" }
  if keyed then
    headers["Idempotency-Key"] = string.format('"wrk-%s-%d"', prefix, counter)
  end
  return wrk.format("POST", path, headers, '{"amount":1}')
end

function done(summary, latency, requests)
  io.write(string.format("p50 %.1f ms, p99 %.1f ms, p99.9 %.1f ms\n",
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency:percentile(99.9) / 1000))
end
