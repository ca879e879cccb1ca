#!/usr/bin/env python3
"""Load MCP client configurations (`mcpServers` JSON, as agent hosts read them) and drive memd
through each with the official Python MCP SDK: list tools, bootstrap, write, search, recall.

    drive_configs.py mcp-stdio.json mcp-http.json

`${VAR}` in a configuration is replaced from the environment (as Claude Code and DSH do); an
unset variable is an error. A stdio server gets the SDK's default environment plus its `env`,
like a host launches it. stdout carries one JSON report; diagnostics go to stderr.
"""

import asyncio
import json
import os
import re
import shutil
import sys
import traceback
from pathlib import Path

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

VAR = re.compile(r"\$\{([A-Z0-9_]+)\}")


def expand(value):
    if isinstance(value, str):

        def one(m):
            name = m.group(1)
            if name not in os.environ:
                raise KeyError(f"the configuration needs ${{{name}}}, which is not set")
            return os.environ[name]

        return VAR.sub(one, value)
    if isinstance(value, list):
        return [expand(v) for v in value]
    if isinstance(value, dict):
        return {k: expand(v) for k, v in value.items()}
    return value


def text_of(result):
    return "\n".join(getattr(c, "text", "") for c in result.content)


async def call(client, name, args):
    result = await client.call_tool(name, args)
    text = text_of(result)
    data = None
    if not result.is_error:
        try:
            data = json.loads(text)
        except ValueError:
            pass
    return {"is_error": bool(result.is_error), "text": text, "json": data}


async def session(client, marker):
    tools = (await client.list_tools()).tools
    report = {"server": client.server_info.name if client.server_info else None}
    report["tools"] = sorted(t.name for t in tools)
    report["bootstrap"] = await call(client, "memory_bootstrap", {})
    report["write"] = await call(
        client, "memory_write", {"text": f"The {marker} project ships on Friday; Lin owns the release."}
    )
    report["search"] = await call(client, "memory_search", {"query": marker, "mode": "fulltext"})
    report["recall"] = await call(
        client, "memory_recall", {"messages": [f"when does the {marker} project ship?"], "format": "block"}
    )
    return report


async def drive(path: Path):
    config = json.loads(path.read_text())
    servers = config["mcpServers"]
    (name, server), *rest = servers.items()
    assert not rest, f"{path.name}: one server expected"
    server = expand(server)
    marker = "axolotl" + re.sub(r"[^a-z]", "", path.stem)
    http = None
    if "command" in server:
        command = shutil.which(server["command"]) or server["command"]
        params = StdioServerParameters(command=command, args=server.get("args", []), env=server.get("env"))
        transport = "stdio"
    else:
        assert server.get("type") in ("http", "streamable-http", None), server.get("type")
        http = create_mcp_http_client(headers=server.get("headers") or {})
        params = streamable_http_client(server["url"], http_client=http)
        transport = "http"
    try:
        async with Client(params, read_timeout_seconds=60) as client:
            report = await session(client, marker)
    finally:
        if http is not None:
            await http.aclose()
    report.update({"name": name, "transport": transport, "marker": marker})
    return report


async def main(paths):
    out = {}
    for p in paths:
        try:
            out[Path(p).name] = await drive(Path(p))
        except BaseException as e:  # report, do not hide, any failure
            traceback.print_exc(file=sys.stderr)
            out[Path(p).name] = {"fatal": f"{type(e).__name__}: {e}"}
    print(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
