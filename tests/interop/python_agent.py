"""An agent on the official MCP Python SDK's *client*, for Switchyard's tests with real clients.

It connects to one Streamable HTTP endpoint with the SDK's ``streamable_http_client`` transport and a
``ClientSession``, initializes, and then carries out commands read from stdin, one per line, so the test that
drives it can change the world (restart a backend) between two commands of one MCP session:

* ``list``: ``tools/list`` (every page);
* ``call NAME JSON``: ``tools/call`` of tool NAME with the JSON object as its arguments;
* ``callmeta NAME JSON``: the same, JSON being ``{"arguments": {...}, "_meta": {...}}`` (a request ``_meta``);
* ``changes``: how many ``notifications/tools/list_changed`` the session received so far;
* ``quit`` (or end of stdin): closes the session (the SDK sends ``DELETE``) and exits.

Every outcome is one JSON object on one stdout line, in order:

* after connecting: ``{"ok": true, "initialized": {"protocolVersion": ..., "serverName": ..., "tools": bool}}``;
* ``list``: ``{"ok": true, "tools": [name, ...]}``;
* ``call``: ``{"ok": true, "isError": bool, "texts": [text of each text block, ...], "structured": ...,
  "meta": ...}`` (``structured`` is the result's ``structuredContent``, ``meta`` its ``_meta``, or null);
* ``changes``: ``{"ok": true, "toolsListChanged": count}``;
* any failure (a JSON-RPC error, a transport error, a bad command): ``{"ok": false, "error": "..."}``.
  A failure to connect or initialize is printed the same way, and the script exits with status 1.

Credentials (both optional, for a gateway that authenticates agents):

* ``--header NAME=VALUE`` (repeatable): sent with every request, e.g. ``Authorization=Bearer <api key>``;
* ``--oauth``: the SDK's ``OAuthClientProvider`` finds the authorization server from the gateway's 401 and its
  Protected Resource Metadata, registers itself, and runs the authorization code flow with PKCE. Consent is
  automated: the redirect handler GETs the authorization URL without following the redirect and hands the
  ``code`` and ``state`` of its ``Location`` to the callback handler. Tokens are kept in memory only.

Logs go to stderr. Usage: ``python python_agent.py URL [--header NAME=VALUE]... [--oauth]``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

REDIRECT_URI = "http://127.0.0.1:1/callback"  # never contacted: the redirect is read, not followed


class MemoryStorage(TokenStorage):
    """Tokens and the registered client, for the life of the process."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class AutomaticConsent:
    """The user's browser, reduced to one GET: the authorization server consents at once and redirects."""

    def __init__(self) -> None:
        self.result: AuthorizationCodeResult | None = None

    async def redirect(self, authorization_url: str) -> None:
        async with httpx2.AsyncClient() as browser:
            response = await browser.get(authorization_url)
        location = httpx2.URL(response.headers["location"])
        params = location.params
        self.result = AuthorizationCodeResult(code=params["code"], state=params.get("state"), iss=params.get("iss"))

    async def callback(self) -> AuthorizationCodeResult:
        if self.result is None:
            raise RuntimeError("the authorization server did not redirect with a code")
        return self.result


def oauth_provider(url: str) -> OAuthClientProvider:
    consent = AutomaticConsent()
    metadata = OAuthClientMetadata(
        client_name="switchyard-test-agent",
        redirect_uris=[REDIRECT_URI],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )
    return OAuthClientProvider(url, metadata, MemoryStorage(), consent.redirect, consent.callback)


def emit(answer: dict[str, Any]) -> None:
    print(json.dumps(answer), flush=True)


def failure(error: BaseException) -> dict[str, Any]:
    return {"ok": False, "error": describe(error)}


def describe(error: BaseException) -> str:
    """The error and, for an exception group (anyio's task groups raise them), the errors inside it."""
    text = f"{type(error).__name__}: {error}"
    if isinstance(error, BaseExceptionGroup):
        text += " [" + "; ".join(describe(inner) for inner in error.exceptions) + "]"
    return text


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


async def call_tool(session: ClientSession, rest: str, with_meta: bool = False) -> dict[str, Any]:
    name, _, arguments = rest.partition(" ")
    parsed = json.loads(arguments) if arguments.strip() else {}
    if with_meta:
        result = await session.call_tool(name, parsed.get("arguments", {}), meta=parsed.get("_meta"))
    else:
        result = await session.call_tool(name, parsed)
    texts = [block.text for block in result.content if getattr(block, "type", None) == "text"]
    return {
        "ok": True,
        "isError": bool(result.is_error),
        "texts": texts,
        "structured": result.structured_content,
        "meta": result.meta,
    }


class Notifications:
    """Counts the server notifications the session surfaces that a test asks about."""

    def __init__(self) -> None:
        self.tools_list_changed = 0

    async def handle(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.tools_list_changed += 1


NOTIFICATIONS = Notifications()


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
            elif command == "callmeta":
                answer = await call_tool(session, rest, with_meta=True)
            elif command == "changes":
                answer = {"ok": True, "toolsListChanged": NOTIFICATIONS.tools_list_changed}
            else:
                answer = {"ok": False, "error": f"unknown command {command!r}"}
        except Exception as error:  # every failure is reported to the test, which decides
            answer = failure(error)
        emit(answer)


async def main(url: str, headers: dict[str, str], oauth: bool) -> int:
    auth = oauth_provider(url) if oauth else None
    try:
        async with (
            create_mcp_http_client(headers=headers, auth=auth) as http,
            streamable_http_client(url, http_client=http) as (read, write),
        ):
            async with ClientSession(read, write, message_handler=NOTIFICATIONS.handle) as session:
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


def parse(arguments: list[str]) -> tuple[str, dict[str, str], bool] | None:
    """URL, headers, whether to use OAuth; None when the arguments are not understood."""
    if not arguments:
        return None
    url, rest, headers, oauth = arguments[0], arguments[1:], {}, False
    while rest:
        option = rest.pop(0)
        if option == "--oauth":
            oauth = True
        elif option == "--header" and rest and "=" in rest[0]:
            name, _, value = rest.pop(0).partition("=")
            headers[name] = value
        else:
            return None
    return url, headers, oauth


if __name__ == "__main__":
    parsed = parse(sys.argv[1:])
    if parsed is None:
        print("usage: python_agent.py URL [--header NAME=VALUE]... [--oauth]", file=sys.stderr)
        sys.exit(2)
    sys.exit(anyio.run(main, *parsed))
