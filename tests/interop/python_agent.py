"""An agent on the official MCP Python SDK's *client*, for Switchyard's tests with real clients.

It connects to one Streamable HTTP endpoint with the SDK's ``streamable_http_client`` transport and a
``ClientSession``, initializes, and then carries out commands read from stdin, one per line, so the test that
drives it can change the world (restart a backend) between two commands of one MCP session:

* ``list``: ``tools/list`` (every page);
* ``call NAME JSON``: ``tools/call`` of tool NAME with the JSON object as its arguments;
* ``quit`` (or end of stdin): closes the session (the SDK sends ``DELETE``) and exits.

Every outcome is one JSON object on one stdout line, in order:

* after connecting: ``{"ok": true, "initialized": {"protocolVersion": ..., "serverName": ..., "tools": bool}}``;
* ``list``: ``{"ok": true, "tools": [name, ...]}``;
* ``call``: ``{"ok": true, "isError": bool, "texts": [text of each text block, ...], "structured": ...}``
  (``structured`` is the result's ``structuredContent``, or null);
* any failure (a JSON-RPC error, a transport error, a bad command): ``{"ok": false, "error": "..."}``.
  A failure to connect or initialize is printed the same way, and the script exits with status 1.

Logs go to stderr. Usage: ``python python_agent.py URL``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


def emit(answer: dict[str, Any]) -> None:
    print(json.dumps(answer), flush=True)


def failure(error: BaseException) -> dict[str, Any]:
    return {"ok": False, "error": f"{type(error).__name__}: {error}"}


async def list_tools(session: ClientSession) -> dict[str, Any]:
    names: list[str] = []
    cursor: str | None = None
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        names.extend(tool.name for tool in page.tools)
        cursor = page.next_cursor
        if not cursor:
            return {"ok": True, "tools": names}


async def call_tool(session: ClientSession, rest: str) -> dict[str, Any]:
    name, _, arguments = rest.partition(" ")
    parsed = json.loads(arguments) if arguments.strip() else {}
    result = await session.call_tool(name, parsed)
    texts = [block.text for block in result.content if getattr(block, "type", None) == "text"]
    return {"ok": True, "isError": bool(result.is_error), "texts": texts, "structured": result.structured_content}


async def run(session: ClientSession) -> None:
    while True:
        line = await anyio.to_thread.run_sync(sys.stdin.readline)
        if not line:
            return
        command, _, rest = line.strip().partition(" ")
        if command == "quit":
            return
        try:
            if command == "list":
                answer = await list_tools(session)
            elif command == "call":
                answer = await call_tool(session, rest)
            else:
                answer = {"ok": False, "error": f"unknown command {command!r}"}
        except Exception as error:  # every failure is reported to the test, which decides
            answer = failure(error)
        emit(answer)


async def main(url: str) -> int:
    try:
        async with streamable_http_client(url) as (read, write):
            async with ClientSession(read, write) as session:
                try:
                    result = await session.initialize()
                except Exception as error:
                    emit(failure(error))
                    return 1
                emit(
                    {
                        "ok": True,
                        "initialized": {
                            "protocolVersion": result.protocol_version,
                            "serverName": result.server_info.name,
                            "tools": result.capabilities.tools is not None,
                        },
                    }
                )
                await run(session)
    except Exception as error:
        emit(failure(error))
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python_agent.py URL", file=sys.stderr)
        sys.exit(2)
    sys.exit(anyio.run(main, sys.argv[1]))
