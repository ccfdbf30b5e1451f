-- wrk script for scripts/bench: POST /tickets, every body unique (run nonce, thread, counter),
-- so each request is a new ticket and a new outbox row, never a dedup shortcut; and a
-- one-line summary for the bench to read instead of wrk's human report.

local headers = { ["Content-Type"] = "application/json" }
local nonce = os.getenv("BENCH_NONCE") or tostring(os.time())
local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("thread_id", threads)
end

local counter = 0

function request()
  counter = counter + 1
  local id = nonce .. "-" .. thread_id .. "-" .. counter
  local body = '{"subject":"Bench ticket ' .. id .. '","message":"Refund please, order '
    .. id .. ' was charged twice."}'
  return wrk.format("POST", "/tickets", headers, body)
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("WRK rps=%.1f p50_ms=%.2f p99_ms=%.2f requests=%d non2xx=%d errors=%d\n",
    summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    summary.requests, e.status, e.connect + e.read + e.write + e.timeout))
end
