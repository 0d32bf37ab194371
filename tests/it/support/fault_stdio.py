#!/usr/bin/env python3
"""A stdio MCP server that misbehaves on demand, for tests/it/stdio.rs (Python 3 standard library only).

Usage: fault_stdio.py MODE. Every mode speaks newline-delimited JSON-RPC on stdin/stdout and answers
`initialize`, `ping` and `tools/list` correctly; MODE decides what `tools/call` (or the start) does:

  normal    tools work: echo, counter (per process), env (the environment as JSON), grandchild (starts a
            grandchild that ignores SIGTERM and returns its PID), ask (asks the client `ping` and `roots/list`
            and returns the answers), progress (sends progress for the caller's token and a log message),
            gate (appends a line to the file `log`, then answers once the file `release` exists)
  crash     the process exits (status 3) on tools/call, without answering
  early     the process exits (status 1) before reading anything
  noise     ~2 MiB of stderr before every answer (a client that does not drain stderr blocks us)
  garbage   a line that is not JSON on stdout instead of an answer
  huge      an answer line of 64 MiB
  hang      tools/call is never answered, and stdin closing is ignored
  modern    a 2026-07-28 server: `server/discover` answers (tools and prompts list changes, resource
            subscriptions), `initialize` and any request without `_meta` protocolVersion 2026-07-28 get -32022;
            `subscriptions/listen` gets the acknowledgement, `notifications/resources/updated` per subscribed URI and
            a tool list change (when asked), and stays unanswered; the tool `meta` returns its request's `_meta`

With FAULT_EARLY_IF=PATH in the environment, any mode behaves as `early` while PATH exists (so a test can let
discovery succeed and then make the next processes fail to start).

In every mode, `notifications/cancelled` is remembered and the method `fault/cancelled` answers with the
params of every cancellation received so far; `fault/received` answers with the method of every request received
so far (so a test can see a call arrived instead of sleeping).
"""

import json
import os
import signal
import subprocess
import sys
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "normal"
COUNT = [0]
CANCELLED = []
RECEIVED = []

TOOLS = [
    {"name": name, "description": name, "inputSchema": {"type": "object"}}
    for name in ["echo", "counter", "env", "grandchild", "ask", "progress", "pid", "sleep", "announce", "grow", "gate"]
]


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def receive():
    line = sys.stdin.readline()
    return json.loads(line) if line else None


def text(value):
    return {"content": [{"type": "text", "text": value}]}


def ask(method, request_id):
    """Sends the client a request and waits for its answer (other messages meanwhile are dropped)."""
    send({"jsonrpc": "2.0", "id": request_id, "method": method})
    while True:
        message = receive()
        if message is None or message.get("id") == request_id and "method" not in message:
            return message


def start_grandchild():
    code = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('ready', flush=True)\n"
        "time.sleep(600)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    child.stdout.readline()
    return child.pid


def call_tool(params):
    name = params.get("name")
    arguments = params.get("arguments") or {}
    if name == "echo":
        return text(arguments.get("text", ""))
    if name == "counter":
        COUNT[0] += 1
        return text(str(COUNT[0]))
    if name == "env":
        return text(json.dumps(dict(os.environ)))
    if name == "grandchild":
        return text(str(start_grandchild()))
    if name == "ask":
        answers = [ask("ping", "s-1"), ask("roots/list", "s-2")]
        return text(json.dumps(answers))
    if name == "progress":
        token = params.get("_meta", {}).get("progressToken")
        send({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": 1}})
        send({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 999999, "progress": 1}})
        send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "working"}})
        return text("done")
    if name == "announce":
        return text("announced")
    if name == "grow":
        if not any(tool["name"] == "extra" for tool in TOOLS):
            TOOLS.append({"name": "extra", "description": "extra", "inputSchema": {"type": "object"}})
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        return text("grown")
    if name == "pid":
        return text(str(os.getpid()))
    if name == "gate":
        with open(arguments["log"], "a") as log:
            log.write(f"{os.getpid()}\n")
        while not os.path.exists(arguments["release"]):
            time.sleep(0.02)
        return text("released")
    if name == "sleep":
        time.sleep(float(arguments.get("seconds", 1)))
        return text("slept")
    return {"content": [{"type": "text", "text": f"unknown tool {name}"}], "isError": True}


def misbehave(request_id):
    """What the mode does instead of answering tools/call; returns True when the call was handled."""
    if MODE == "crash":
        os._exit(3)
    if MODE == "garbage":
        sys.stdout.write("this is not JSON-RPC\n")
        sys.stdout.flush()
        time.sleep(600)
    if MODE == "huge":
        sys.stdout.write('{"jsonrpc":"2.0","id":%s,"result":{"content":"' % json.dumps(request_id))
        chunk = "x" * 65536
        for _ in range(1024):
            sys.stdout.write(chunk)
        sys.stdout.write('"}}\n')
        sys.stdout.flush()
        return True
    if MODE == "hang":
        return True
    return False


MODERN = "2026-07-28"


def answer_modern(message, method, request_id):
    """The 2026-07-28 side of mode `modern`; True when the message was answered here."""
    meta = (message.get("params") or {}).get("_meta") or {}
    if meta.get("io.modelcontextprotocol/protocolVersion") != MODERN:
        error = {"code": -32022, "message": "unsupported protocol version", "data": {"supported": [MODERN]}}
        send({"jsonrpc": "2.0", "id": request_id, "error": error})
        return True
    if method == "server/discover":
        capabilities = {"tools": {"listChanged": True}, "resources": {"subscribe": True}}
        send({"jsonrpc": "2.0", "id": request_id, "result": {
            "resultType": "complete", "supportedVersions": [MODERN], "capabilities": capabilities,
            "ttlMs": 0, "cacheScope": "public"}})
        return True
    if method == "subscriptions/listen":
        asked = message["params"].get("notifications", {})
        tag = {"io.modelcontextprotocol/subscriptionId": request_id}
        send({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
              "params": {"notifications": asked, "_meta": tag}})
        for uri in asked.get("resourceSubscriptions", []):
            send({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri, "_meta": tag}})
        if asked.get("toolsListChanged"):
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": tag}})
        return True
    if method == "tools/call" and message["params"].get("name") == "meta":
        send({"jsonrpc": "2.0", "id": request_id, "result": text(json.dumps(meta))})
        return True
    return False


def answer(message):
    method, request_id = message.get("method"), message.get("id")
    if method == "notifications/cancelled":
        CANCELLED.append(message.get("params"))
    if request_id is None or method is None:
        return  # notifications and the client's answers need no answer
    RECEIVED.append(method)
    if MODE == "modern" and answer_modern(message, method, request_id):
        return
    if MODE == "noise":
        for index in range(10000):
            sys.stderr.write(f"noise line {index} " + "." * 200 + "\n")
        sys.stderr.flush()
    if method == "initialize":
        result = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "fault-stdio", "version": "0"},
        }
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "fault/cancelled":
        result = {"cancelled": CANCELLED}
    elif method == "fault/received":
        result = {"methods": RECEIVED}
    elif method == "tools/call":
        if misbehave(request_id):
            return
        params = message.get("params") or {}
        result = call_tool(params)
        if params.get("name") == "announce":
            send({"jsonrpc": "2.0", "id": request_id, "result": text("announced")})
            send({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "fault://watched"}})
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            return
    else:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"no method {method}"}})
        return
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def main():
    sys.stderr.write(f"fault_stdio.py starting in mode {MODE}, pid {os.getpid()}\n")
    sys.stderr.flush()
    early_if = os.environ.get("FAULT_EARLY_IF")
    if MODE == "early" or early_if and os.path.exists(early_if):
        sys.exit(1)
    try:
        while True:
            message = receive()
            if message is None:
                break
            answer(message)
    except BrokenPipeError:
        os._exit(0)
    if MODE == "hang":
        signal.pause()


main()
