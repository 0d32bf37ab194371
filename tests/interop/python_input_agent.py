"""A 2025-11-25 agent on the official MCP Python SDK's client that answers the server's requests, for Switchyard's
test of multi round-trip results turned into server-to-client requests (``tests/it/input_rounds.rs``).

It initializes with the SDK's own handshake, giving the session an elicitation, a sampling and a list-roots
callback (so the SDK declares those capabilities), calls one tool, and prints one JSON line:

* ``{"ok": true, "isError": bool, "texts": [text of each text block, ...], "asked": [[method, detail], ...]}``,
  where ``asked`` lists what the callbacks were asked, in order (the elicitation's message, the sampling request's
  first text, ``""`` for roots);
* ``{"ok": false, "error": "..."}`` on any failure (exit status 1).

The callbacks answer: elicitation → accept with ``{"seats": 2}``; sampling → the assistant text "a window seat"
from model "python-sdk-test"; roots → ``file:///trips`` named "trips".

Usage: ``python python_input_agent.py URL TOOL ARGUMENTS_JSON``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp import ClientSession
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client

asked: list[list[str]] = []


async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    asked.append(["elicitation/create", params.message])
    return types.ElicitResult(action="accept", content={"seats": 2})


async def sample(context: ClientRequestContext, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    first = params.messages[0].content
    asked.append(["sampling/createMessage", getattr(first, "text", "")])
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text="a window seat"),
        model="python-sdk-test",
        stop_reason="endTurn",
    )


async def list_roots(context: ClientRequestContext) -> types.ListRootsResult:
    asked.append(["roots/list", ""])
    return types.ListRootsResult(roots=[types.Root(uri="file:///trips", name="trips")])


async def main(url: str, tool: str, arguments: dict[str, Any]) -> int:
    try:
        async with streamable_http_client(url) as (read, write):
            async with ClientSession(
                read, write, sampling_callback=sample, elicitation_callback=elicit, list_roots_callback=list_roots
            ) as session:
                await session.initialize()
                result = await session.call_tool(tool, arguments)
    except Exception as error:  # reported to the test, which decides
        print(json.dumps({"ok": False, "error": f"{type(error).__name__}: {error}"}), flush=True)
        return 1
    texts = [block.text for block in result.content if getattr(block, "type", None) == "text"]
    print(json.dumps({"ok": True, "isError": bool(result.is_error), "texts": texts, "asked": asked}), flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print("usage: python_input_agent.py URL TOOL ARGUMENTS_JSON", file=sys.stderr)
        sys.exit(2)
    sys.exit(anyio.run(main, sys.argv[1], sys.argv[2], json.loads(sys.argv[3])))
