"""Collects the benchmark catalog: the tool lists public MCP servers publish, read with `tools/list`.

Each server in SERVERS is started over stdio inside a network namespace of its own (`unshare --net`: it can reach
nothing, so a server that would phone home or check a credential cannot), asked `initialize` then `tools/list`
(every page), and stopped. Only facts are kept: each tool's name, title, description and input schema. The result
is `catalog.json`, one entry per server with its package, version and source, as README.md cites them.

Usage: python3 collect.py NODE_MODULES_DIR PYTHON_BIN_DIR EVERYTHING_DIR GIT_REPO > catalog.json
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time

# (backend name, package, version, source repository, command relative to the install, extra args, env)
SERVERS = [
    ("filesystem", "@modelcontextprotocol/server-filesystem", "2026.8.31", "github.com/modelcontextprotocol/servers",
     ["node", "{nm}/@modelcontextprotocol/server-filesystem/dist/index.js", "/tmp"], {}),
    ("memory", "@modelcontextprotocol/server-memory", "2026.8.31", "github.com/modelcontextprotocol/servers",
     ["node", "{nm}/@modelcontextprotocol/server-memory/dist/index.js"], {}),
    ("github", "@modelcontextprotocol/server-github", "2025.4.8", "github.com/modelcontextprotocol/servers-archived",
     ["node", "{nm}/@modelcontextprotocol/server-github/dist/index.js"], {"GITHUB_PERSONAL_ACCESS_TOKEN": "x"}),
    ("gitlab", "@modelcontextprotocol/server-gitlab", "2025.4.25", "github.com/modelcontextprotocol/servers-archived",
     ["node", "{nm}/@modelcontextprotocol/server-gitlab/dist/index.js"], {"GITLAB_PERSONAL_ACCESS_TOKEN": "x"}),
    ("slack", "@modelcontextprotocol/server-slack", "2025.4.25", "github.com/modelcontextprotocol/servers-archived",
     ["node", "{nm}/@modelcontextprotocol/server-slack/dist/index.js"], {"SLACK_BOT_TOKEN": "x", "SLACK_TEAM_ID": "x"}),
    ("maps", "@modelcontextprotocol/server-google-maps", "0.6.2", "github.com/modelcontextprotocol/servers-archived",
     ["node", "{nm}/@modelcontextprotocol/server-google-maps/dist/index.js"], {"GOOGLE_MAPS_API_KEY": "x"}),
    ("brave", "@modelcontextprotocol/server-brave-search", "0.6.2", "github.com/modelcontextprotocol/servers-archived",
     ["node", "{nm}/@modelcontextprotocol/server-brave-search/dist/index.js"], {"BRAVE_API_KEY": "x"}),
    ("postgres", "@modelcontextprotocol/server-postgres", "0.6.2", "github.com/modelcontextprotocol/servers-archived",
     ["node", "{nm}/@modelcontextprotocol/server-postgres/dist/index.js", "postgresql://127.0.0.1/none"], {}),
    ("thinking", "@modelcontextprotocol/server-sequential-thinking", "2026.8.31",
     "github.com/modelcontextprotocol/servers",
     ["node", "{nm}/@modelcontextprotocol/server-sequential-thinking/dist/index.js"], {}),
    ("puppeteer", "@modelcontextprotocol/server-puppeteer", "2025.5.12",
     "github.com/modelcontextprotocol/servers-archived",
     ["node", "{nm}/@modelcontextprotocol/server-puppeteer/dist/index.js"], {}),
    ("playwright", "@playwright/mcp", "0.0.83", "github.com/microsoft/playwright-mcp",
     ["node", "{nm}/@playwright/mcp/cli.js"], {}),
    ("notion", "@notionhq/notion-mcp-server", "2.5.2", "github.com/makenotion/notion-mcp-server",
     ["node", "{nm}/@notionhq/notion-mcp-server/bin/cli.mjs"], {"NOTION_TOKEN": "x"}),
    ("kubernetes", "mcp-server-kubernetes", "4.1.7", "github.com/Flux159/mcp-server-kubernetes",
     ["node", "{nm}/mcp-server-kubernetes/dist/index.js"], {}),
    ("git", "@cyanheads/git-mcp-server", "2.15.3", "github.com/cyanheads/git-mcp-server",
     ["node", "{nm}/@cyanheads/git-mcp-server/dist/index.js"], {"MCP_TRANSPORT_TYPE": "stdio"}),
    ("circleci", "@circleci/mcp-server-circleci", "0.20.0", "github.com/CircleCI-Public/mcp-server-circleci",
     ["node", "{nm}/@circleci/mcp-server-circleci/dist/index.js"], {"CIRCLECI_TOKEN": "x"}),
    ("mongodb", "mongodb-mcp-server", "3.0.4", "github.com/mongodb-js/mongodb-mcp-server",
     ["node", "{nm}/mongodb-mcp-server/dist/esm/index.js"], {"MDB_MCP_TELEMETRY": "disabled"}),
    ("firecrawl", "firecrawl-mcp", "3.26.0", "github.com/firecrawl/firecrawl-mcp-server",
     ["node", "{nm}/firecrawl-mcp/dist/index.js"], {"FIRECRAWL_API_KEY": "x"}),
    ("gitpy", "mcp-server-git", "2026.10.19", "github.com/modelcontextprotocol/servers",
     ["{py}/mcp-server-git", "--repository", "{repo}"], {}),
    ("jira", "@aashari/mcp-server-atlassian-jira", "3.3.0", "github.com/aashari/mcp-server-atlassian-jira",
     ["node", "{nm}/@aashari/mcp-server-atlassian-jira/dist/index.js"],
     {"ATLASSIAN_SITE_NAME": "x", "ATLASSIAN_USER_EMAIL": "x", "ATLASSIAN_API_TOKEN": "x"}),
    ("chart", "@antv/mcp-server-chart", "0.9.10", "github.com/antvis/mcp-server-chart",
     ["node", "{nm}/@antv/mcp-server-chart/build/index.js"], {}),
    ("context7", "@upstash/context7-mcp", "4.1.1", "github.com/upstash/context7",
     ["node", "{nm}/@upstash/context7-mcp/dist/index.js"], {}),
    ("elasticsearch", "@elastic/mcp-server-elasticsearch", "0.3.1", "github.com/elastic/mcp-server-elasticsearch",
     ["node", "{nm}/@elastic/mcp-server-elasticsearch/dist/index.js"], {"ES_URL": "http://127.0.0.1:9"}),
    ("everything", "@modelcontextprotocol/server-everything", "2026.8.31", "github.com/modelcontextprotocol/servers",
     ["node", "{everything}/dist/index.js", "stdio"], {}),
    ("fetch", "mcp-server-fetch", "2026.10.24", "github.com/modelcontextprotocol/servers",
     ["{py}/mcp-server-fetch"], {}),
    ("time", "mcp-server-time", "2026.10.19", "github.com/modelcontextprotocol/servers",
     ["{py}/mcp-server-time", "--local-timezone", "UTC"], {}),
]

KEPT = ("name", "title", "description", "inputSchema")


class Server:
    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            ["unshare", "--net", *command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **env},
        )
        self.buffer = b""
        self.next_id = 0

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = self.read(deadline)
            if message is not None and message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]
        raise TimeoutError(method)

    def send(self, message: dict) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def read(self, deadline: float) -> dict | None:
        assert self.process.stdout is not None
        while b"\n" not in self.buffer:
            ready, _, _ = select.select([self.process.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                return None
            chunk = os.read(self.process.stdout.fileno(), 65536)
            if not chunk:
                raise EOFError("the server exited")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            return None  # a server that logs to stdout

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


def tools_of(command: list[str], env: dict[str, str]) -> list[dict]:
    server = Server(command, env)
    try:
        server.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                      "clientInfo": {"name": "switchyard-bench", "version": "1"}})
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        tools, cursor = [], None
        while True:
            page = server.request("tools/list", {"cursor": cursor} if cursor else {})
            tools.extend({key: tool[key] for key in KEPT if key in tool} for tool in page.get("tools", []))
            cursor = page.get("nextCursor")
            if not cursor:
                return tools
    finally:
        server.stop()


def main(node_modules: str, python_bin: str, everything: str, repo: str) -> None:
    catalog = []
    for backend, package, version, source, command, env in SERVERS:
        command = [part.format(nm=node_modules, py=python_bin, everything=everything, repo=repo) for part in command]
        try:
            tools = tools_of(command, env)
        except Exception as error:  # a server that cannot list offline is left out, and said so
            print(f"{backend}: {error}", file=sys.stderr)
            continue
        print(f"{backend}: {len(tools)} tools", file=sys.stderr)
        catalog.append({"backend": backend, "package": package, "version": version, "source": source,
                        "tools": tools})
    json.dump(catalog, sys.stdout, indent=1, ensure_ascii=False)
    print()


if __name__ == "__main__":
    main(*sys.argv[1:5])
