-- wrk script: one MCP `tools/call` per request, each with a fresh JSON-RPC id.
--
-- Environment (set by run.sh):
--   SY_SESSION  the mcp-session-id obtained by `initialize` (one session per target,
--               shared by every wrk connection and thread), or several separated by commas: then wrk
--               thread N uses the (N mod count)th, so `-tK -cK` with K sessions is K agents with one
--               connection each
--   SY_TOOL     tool name, e.g. `echo` (direct) or `demo__echo` (through the gateway)
--   SY_TEXT     the text to echo (default "hello")
--   SY_ACCEPT   the Accept header (default "application/json, text/event-stream", what MCP clients must send;
--               for experiments only)
--   SY_AUTHORIZATION  an Authorization header value (an API key or JWT as "Bearer ..."), when the target wants one
--
-- Every response is checked: it must be HTTP 200, carry a JSON-RPC "result", not be a
-- tool error ("isError":true), and echo SY_TEXT back. done() prints one machine-readable line:
--   SYBENCH requests=N duration_us=N p50_us=N p90_us=N p99_us=N max_us=N ok=N non200=N
--           noresult=N sock_connect=N sock_read=N sock_write=N sock_timeout=N
-- run.sh refuses a run with any failure.

local sessions = {}
for one in string.gmatch(os.getenv("SY_SESSION") or "", "[^,]+") do table.insert(sessions, one) end
local tool = os.getenv("SY_TOOL") or "echo"
local text = os.getenv("SY_TEXT") or "hello"
local accept = os.getenv("SY_ACCEPT") or "application/json, text/event-stream"
local authorization = os.getenv("SY_AUTHORIZATION") or ""

local threads = {}
local counter = 0

function setup(thread)
   thread:set("tid", #threads)
   thread:set("session", sessions[#threads % math.max(#sessions, 1) + 1] or "")
   table.insert(threads, thread)
end

function init(args)
   -- Ids stay unique across threads (the thread's index) and across runs on one session (the run's start time
   -- and a random number): the gateway keys a call by its session and id, so a repeated id is a replay of the
   -- stored result, not a call.
   math.randomseed(os.time() + (tid or 0))
   id_prefix = '"' .. os.time() .. "-" .. math.random(1000000000) .. "-" .. (tid or 0) .. "-"
   seq = 0
   ok = 0
   non200 = 0
   noresult = 0
   wrk.method = "POST"
   wrk.headers["Content-Type"] = "application/json"
   wrk.headers["Accept"] = accept
   wrk.headers["Mcp-Session-Id"] = session
   wrk.headers["MCP-Protocol-Version"] = "2025-11-25"
   if authorization ~= "" then wrk.headers["Authorization"] = authorization end
end

local prefix = '{"jsonrpc":"2.0","id":'
local suffix = ',"method":"tools/call","params":{"name":"' .. tool
   .. '","arguments":{"text":"' .. text .. '"}}}'

function request()
   seq = seq + 1
   return wrk.format(nil, nil, nil, prefix .. id_prefix .. seq .. '"' .. suffix)
end

function response(status, headers, body)
   if status ~= 200 then
      non200 = non200 + 1
      if non200 <= 3 then io.stderr:write("non-200 (" .. status .. "): " .. tostring(body) .. "\n") end
      return
   end
   if body == nil or not body:find('"result"', 1, true) or body:find('"isError":true', 1, true)
      or not body:find(text, 1, true) then
      noresult = noresult + 1
      if noresult <= 3 then io.stderr:write("bad body: " .. tostring(body) .. "\n") end
      return
   end
   ok = ok + 1
end

function done(summary, latency, requests)
   local t_ok, t_non200, t_noresult = 0, 0, 0
   for _, thread in ipairs(threads) do
      t_ok = t_ok + (thread:get("ok") or 0)
      t_non200 = t_non200 + (thread:get("non200") or 0)
      t_noresult = t_noresult + (thread:get("noresult") or 0)
   end
   local e = summary.errors
   io.write(string.format(
      "SYBENCH requests=%d duration_us=%d p50_us=%d p90_us=%d p99_us=%d max_us=%d ok=%d non200=%d noresult=%d sock_connect=%d sock_read=%d sock_write=%d sock_timeout=%d\n",
      summary.requests, summary.duration, latency:percentile(50), latency:percentile(90),
      latency:percentile(99), latency.max, t_ok, t_non200, t_noresult,
      e.connect, e.read, e.write, e.timeout))
end
