#!/usr/bin/env python3
"""Drive memd's MCP server with the official Python MCP SDK and print one JSON report.

Used by the Rust integration tests (tests/integration/mcp.rs); the SDK comes from PyPI,
pinned in requirements.txt and installed by scripts/setup-test-clients.sh.

  check.py --transport stdio --memd PATH --root DIR --token T [--scenario basic|writes] ...
  check.py --transport http  --url http://127.0.0.1:PORT/mcp --token T [--mode auto|legacy] ...

stdout carries exactly one JSON document; diagnostics go to stderr.
"""

import argparse
import asyncio
import fcntl
import json
import os
import signal
import sys
import time
import traceback

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def text_of(result):
    return "\n".join(getattr(c, "text", "") for c in result.content)


async def call(client, name, args):
    result = await client.call_tool(name, args)
    text = text_of(result)
    try:
        data = json.loads(text) if not result.is_error else None
    except ValueError:
        data = None
    return {"is_error": bool(result.is_error), "text": text, "json": data}


async def basic(client, args):
    report = {}
    report["server_name"] = client.server_info.name if client.server_info else None
    report["protocol_version"] = client.protocol_version
    report["instructions"] = client.instructions or ""
    tools = (await client.list_tools()).tools
    report["tools"] = sorted(t.name for t in tools)
    report["tools_described"] = all(
        t.description and len(t.description) > 40 and t.input_schema.get("type") == "object" for t in tools
    )
    report["write_schema"] = next(t.input_schema for t in tools if t.name == "memory_write")
    marker = args.marker
    wrote = await call(
        client,
        "memory_write",
        {"text": f"{marker} likes hiking in the Alps every September", "kind": "preference", "tags": ["hobby"]},
    )
    report["write"] = wrote
    report["search"] = await call(client, "memory_search", {"query": marker, "mode": "fulltext"})
    rule = f"## Tests\n\n- Write the test first ({marker}-rule)."
    report["category_set"] = await call(
        client,
        "memory_category",
        {"action": "set", "name": "coding-standards", "slot": "coding-requirements", "content": rule},
    )
    report["category_bad_slot"] = await call(
        client, "memory_category", {"action": "set", "name": "x", "slot": "vibes", "content": "y"}
    )
    report["category_list"] = await call(client, "memory_category", {"action": "list"})
    listed = await client.read_resource("category://list")
    report["category_resource"] = json.loads(listed.contents[0].text)
    inject = await client.read_resource("memory://inject")
    report["inject"] = "\n".join(getattr(c, "text", "") for c in inject.contents)
    small = await client.read_resource("memory://inject?max_chars=300")
    report["inject_small"] = "\n".join(getattr(c, "text", "") for c in small.contents)
    resources = await client.list_resources()
    report["resources"] = sorted(r.uri for r in resources.resources)
    templates = await client.list_resource_templates()
    report["templates"] = sorted(t.uri_template for t in templates.resource_templates)
    health = await client.read_resource("health://status")
    report["health"] = json.loads(health.contents[0].text)
    key = f"{marker}-key"
    first = await call(client, "memory_write", {"text": f"{marker} owns a red kayak", "idempotency_key": key})
    again = await call(client, "memory_write", {"text": f"{marker} owns a red kayak", "idempotency_key": key})
    report["idempotent"] = [first, again]
    if first["json"]:
        report["supersede"] = await call(
            client,
            "memory_write",
            {"text": f"{marker} sold the red kayak and owns a blue one", "supersedes": first["json"]["id"]},
        )
    report["timeline"] = await call(client, "memory_timeline", {"limit": 50})
    # The question names what the memory holds (a kayak): recall keeps only hits about the
    # conversation, and "boat" alone is no evidence of a kayak to the lexical side of that decision.
    report["recall"] = await call(
        client, "memory_recall", {"messages": [f"which kayak does {marker} have now?"], "format": "block"}
    )
    report["recent"] = await call(client, "memory_recent", {"limit": 3, "stage": "long"})
    report["category_delete"] = await call(client, "memory_category", {"action": "delete", "name": "coding-standards"})
    report["category_gone"] = await call(client, "memory_category", {"action": "get", "name": "coding-standards"})
    report["bad_empty_text"] = await call(client, "memory_write", {"text": "   "})
    report["bad_type"] = await call(client, "memory_search", {"query": 42})
    report["bad_privacy"] = await call(client, "memory_write", {"text": "x", "privacy": "public"})
    report["missing"] = await call(client, "memory_get", {"id": "fact-main-zzzzzzzz-0000"})
    report["credential"] = await call(
        client, "memory_write", {"text": "my key is sk-abcdefghijklmnopqrstuvwxyz0123456789"}
    )
    report["bootstrap"] = await call(client, "memory_bootstrap", {})
    report["call_capabilities"] = await call(client, "memory_call", {"route": "GET /v1/capabilities"})
    report["call_unknown"] = await call(client, "memory_call", {"route": "/v1/nope"})
    if wrote["json"]:
        mid = wrote["json"]["id"]
        report["tag"] = await call(client, "memory_tag", {"id": mid, "add": ["alps"], "remove": ["hobby"]})
        new_id = (report["tag"]["json"] or {}).get("id", mid)
        res = await client.read_resource(f"memory://{new_id}")
        report["resource_memory"] = json.loads(res.contents[0].text)
        report["forget"] = await call(client, "memory_forget", {"id": new_id, "reason": "test"})
        report["search_after_forget"] = await call(client, "memory_search", {"query": marker, "mode": "fulltext"})
    return report


async def writes(client, args):
    ids, errors = [], []
    for i in range(args.count):
        r = await call(client, "memory_write", {"text": f"{args.marker} note number {i} from {args.label}"})
        if r["is_error"]:
            errors.append(r["text"])
        else:
            ids.append(r["json"]["id"])
    return {"ids": ids, "errors": errors}


async def calls(client, args):
    """Only the --extra calls, in order."""
    out = []
    for step in args.extra:
        name, _, payload = step.partition("=")
        if name == "kill-daemon":
            # SIGKILL the root's daemon (pid in its writer lock) and wait until it is gone.
            pid = int(open(os.path.join(args.root, ".memd.lock")).read().strip())
            os.kill(pid, signal.SIGKILL)
            # Gone means: its writer lock is free (a process stuck in a system
            # call on a loaded machine dies only when the call returns).
            deadline = time.time() + 60
            while time.time() < deadline:
                with open(os.path.join(args.root, ".memd.lock"), "a") as lock:
                    try:
                        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        fcntl.flock(lock, fcntl.LOCK_UN)
                        break
                    except BlockingIOError:
                        pass
                await asyncio.sleep(0.05)
            out.append({"is_error": False, "text": f"killed {pid}", "pid": pid})
        elif name == "prompts":
            listed = (await client.list_prompts()).prompts
            out.append({
                "is_error": False,
                "prompts": [
                    {"name": p.name, "description": p.description or "",
                     "arguments": [a.name for a in (p.arguments or [])]}
                    for p in listed
                ],
            })
        elif name.startswith("prompt:"):
            try:
                got = await client.get_prompt(name[len("prompt:"):], json.loads(payload or "{}"))
                out.append({
                    "is_error": False,
                    "description": got.description or "",
                    "text": "\n".join(getattr(m.content, "text", "") for m in got.messages),
                    "roles": [m.role for m in got.messages],
                })
            except Exception as e:  # an unknown prompt or language is a protocol error
                out.append({"is_error": True, "text": str(e)})
        elif name.startswith("resource:"):
            try:
                res = await client.read_resource(name[len("resource:"):])
                out.append({"is_error": False, "text": "\n".join(getattr(c, "text", "") for c in res.contents)})
            except Exception as e:  # a protocol error is the expected answer for some reads
                out.append({"is_error": True, "text": str(e)})
        else:
            out.append(await call(client, name, json.loads(payload or "{}")))
    return {"calls": out}


async def paging(client, args):
    """Reads memory://list page by page (limit --count) until the last page,
    then the refusals of a bad limit and a bad cursor."""
    ids, pages, cursor = [], 0, None
    while True:
        uri = f"memory://list?limit={args.count}" + (f"&cursor={cursor}" if cursor else "")
        res = await client.read_resource(uri, cache_mode="bypass")
        page = json.loads("\n".join(getattr(c, "text", "") for c in res.contents))
        pages += 1
        ids.extend(m["id"] for m in page["items"])
        cursor = page.get("next_cursor")
        if not cursor or pages > 1000:
            break
    refusals = {}
    for bad in ["limit=0", "limit=101", "limit=abc", "cursor=not-a-cursor", "cursor=1~x%27--"]:
        try:
            await client.read_resource(f"memory://list?{bad}", cache_mode="bypass")
            refusals[bad] = "accepted"
        except Exception as e:
            refusals[bad] = str(e)
    return {"ids": ids, "pages": pages, "refusals": refusals}


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--transport", choices=["stdio", "http"], required=True)
    p.add_argument("--memd")
    p.add_argument("--root")
    p.add_argument("--url")
    p.add_argument("--token", required=True)
    p.add_argument("--mode", default="auto")
    p.add_argument("--scenario", choices=["basic", "writes", "calls", "paging"], default="basic")
    p.add_argument("--marker", default="zebrafinch")
    p.add_argument("--label", default="agent")
    p.add_argument("--count", type=int, default=10)
    p.add_argument("--extra", action="append", default=[], help="TOOL=JSON or resource:URI, for --scenario calls")
    args = p.parse_args()

    if args.transport == "stdio":
        server = StdioServerParameters(
            command=args.memd,
            args=["mcp"],
            env={"MEMD_ROOT": args.root, "MEMD_TOKEN": args.token, "MEMD_MODELS_DIR": args.root + "/no-models"},
        )
        http = None
    else:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {args.token}"})
        server = streamable_http_client(args.url, http_client=http)
    try:
        async with Client(server, mode=args.mode, read_timeout_seconds=120) as client:
            run = {"basic": basic, "writes": writes, "calls": calls, "paging": paging}[args.scenario]
            report = await run(client, args)
    except BaseException as e:  # report, do not hide, any failure
        traceback.print_exc(file=sys.stderr)
        report = {"fatal": f"{type(e).__name__}: {e}"}
    finally:
        if http is not None:
            await http.aclose()
    print(json.dumps(report, ensure_ascii=False, default=str))


if __name__ == "__main__":
    asyncio.run(main())
