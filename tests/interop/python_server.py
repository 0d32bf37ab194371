"""A small MCP server on the official Python SDK, for Switchyard's interop tests.

It serves Streamable HTTP at ``http://127.0.0.1:<port>/mcp`` with stateful
sessions, in SSE response mode (the default) or JSON response mode
(``--json``), and offers these tools:

* ``echo {text}`` returns ``text`` as one text block;
* ``add {a, b}`` returns the sum as text (and as structured content);
* ``tool_01`` … ``tool_25``: generated no-op tools whose only purpose is to make
  ``tools/list`` long enough to need several pages.

``tools/list`` paginates (``--page-size``, default 10) with an opaque
``nextCursor``, because the SDK's high-level FastMCP/MCPServer layer returns
every tool in one page; the low-level ``Server`` API hands the handler the
request's ``cursor`` and lets it set ``next_cursor`` on the result.

For the harness to check session reuse from the server's side, every new
session id the server hands out is printed as ``SESSION <id>``, and every
session ended by a client's ``DELETE`` as ``ENDED <id>`` (stdout).

Usage: ``python python_server.py PORT [--json] [--page-size N] [--exit-on-stdin-eof]``.
Once the socket listens, one line ``READY <url>`` is printed to stdout.
It only ever binds 127.0.0.1.

``python python_server.py --stdio [--page-size N]`` serves the same tools over
the SDK's stdio transport instead (newline-delimited JSON-RPC on stdin/stdout),
for Switchyard's stdio backends; it ends when stdin closes.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import sys
import threading
from typing import Any

import mcp_types as types
import uvicorn
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

HOST = "127.0.0.1"
GENERATED_TOOLS = 25


def build_tools() -> list[types.Tool]:
    """The full, fixed-order tool list that pages are cut from."""
    tools = [
        types.Tool(
            name="echo",
            description="Returns the given text unchanged.",
            input_schema={
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            },
        ),
        types.Tool(
            name="add",
            description="Adds two numbers.",
            input_schema={
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"],
            },
        ),
    ]
    for i in range(1, GENERATED_TOOLS + 1):
        tools.append(
            types.Tool(
                name=f"tool_{i:02d}",
                description=f"Generated tool number {i}; returns its own name.",
                input_schema={"type": "object", "properties": {}},
            )
        )
    return tools


# Cursors are opaque to clients; encoding the offset (rather than sending a bare
# number) keeps a client honest about not interpreting or fabricating them.
def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"offset:{offset}".encode()).decode()


def decode_cursor(cursor: str, total: int) -> int:
    try:
        text = base64.urlsafe_b64decode(cursor.encode()).decode()
        prefix, _, number = text.partition(":")
        offset = int(number)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MCPError(types.INVALID_PARAMS, f"invalid cursor: {cursor!r}") from exc
    if prefix != "offset" or not 0 < offset < total:
        raise MCPError(types.INVALID_PARAMS, f"invalid cursor: {cursor!r}")
    return offset


def text_result(text: str, structured: Any = None) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=text)],
        structured_content=structured,
    )


def build_server(page_size: int) -> Server:
    tools = build_tools()
    tool_names = {tool.name for tool in tools}

    async def list_tools(_ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        cursor = params.cursor if params is not None else None
        start = 0 if cursor is None else decode_cursor(cursor, len(tools))
        end = start + page_size
        next_cursor = encode_cursor(end) if end < len(tools) else None
        return types.ListToolsResult(tools=tools[start:end], next_cursor=next_cursor)

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = params.arguments or {}
        if params.name == "echo":
            text = args.get("text")
            if not isinstance(text, str):
                return types.CallToolResult(
                    content=[types.TextContent(text="echo needs a string 'text'")], is_error=True
                )
            return text_result(text)
        if params.name == "add":
            a, b = args.get("a"), args.get("b")
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b)):
                return types.CallToolResult(
                    content=[types.TextContent(text="add needs numbers 'a' and 'b'")], is_error=True
                )
            total = a + b
            return text_result(str(total), {"sum": total})
        if params.name in tool_names:
            return text_result(params.name)
        raise MCPError(types.INVALID_PARAMS, f"unknown tool: {params.name}")

    return Server(
        "switchyard-interop-python",
        version="1.0.0",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


class SessionLog:
    """ASGI middleware printing session starts and ends as the client sees them (on the wire), independent of
    the SDK's internal logging."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.seen: set[str] = set()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method = scope["method"]
        sent_id = dict(scope["headers"]).get(b"mcp-session-id", b"").decode("latin-1")

        async def watch(message: Any) -> None:
            if message["type"] == "http.response.start":
                status = message["status"]
                answered_id = dict(message.get("headers", [])).get(b"mcp-session-id", b"").decode("latin-1")
                if answered_id and answered_id not in self.seen:
                    self.seen.add(answered_id)
                    print(f"SESSION {answered_id}", flush=True)
                if method == "DELETE" and 200 <= status < 300 and sent_id:
                    print(f"ENDED {sent_id}", flush=True)
            await send(message)

        await self.app(scope, receive, watch)


async def serve(port: int, json_response: bool, page_size: int) -> None:
    server = build_server(page_size)
    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        json_response=json_response,
        stateless_http=False,
        host=HOST,
    )
    config = uvicorn.Config(SessionLog(app), host=HOST, port=port, log_level="warning", lifespan="on")
    http = uvicorn.Server(config)
    serving = asyncio.create_task(http.serve())
    # uvicorn sets `started` once the socket is bound and the app's lifespan
    # (which starts the session manager) has completed.
    while not http.started:
        if serving.done():
            await serving
            raise SystemExit("uvicorn exited before it started listening")
        await asyncio.sleep(0.02)
    mode = "json" if json_response else "sse"
    print(f"READY http://{HOST}:{port}/mcp mode={mode} page_size={page_size}", flush=True)
    await serving


async def serve_stdio(page_size: int) -> None:
    from mcp.server.stdio import stdio_server

    server = build_server(page_size)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def exit_on_stdin_eof() -> None:
    """Exit the whole process once stdin ends.

    A test harness holds the write end of our stdin; when the harness dies
    without killing us (a crash, a kill -9), the pipe closes and we follow, so
    no server is left listening.
    """

    def watch() -> None:
        while sys.stdin.buffer.read(4096):
            pass
        os._exit(0)

    threading.Thread(target=watch, name="stdin-watch", daemon=True).start()


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int, nargs="?", help="TCP port on 127.0.0.1")
    parser.add_argument("--stdio", action="store_true", help="serve over stdin/stdout instead of HTTP")
    parser.add_argument("--json", action="store_true", help="answer POSTs with JSON instead of SSE")
    parser.add_argument("--page-size", type=int, default=10, help="tools per tools/list page")
    parser.add_argument("--exit-on-stdin-eof", action="store_true", help="exit when stdin is closed")
    args = parser.parse_args(argv)
    if args.page_size < 1:
        parser.error("--page-size must be at least 1")
    if args.stdio:
        asyncio.run(serve_stdio(args.page_size))
        return
    if args.port is None:
        parser.error("PORT is required unless --stdio is given")
    if args.exit_on_stdin_eof:
        exit_on_stdin_eof()
    asyncio.run(serve(args.port, args.json, args.page_size))


if __name__ == "__main__":
    main(sys.argv[1:])
