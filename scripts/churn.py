#!/usr/bin/env python3
"""The full-text index's churn, quickly: a real `memd serve` (embedder off, no
rate limit) in a fresh root, one client that writes a LoCoMo line, forgets the
oldest once 2,600 are live, and runs a full-text search (which commits the
write) in a loop. Each round is a commit, so an hour of the soak's commits
takes minutes; the server's resident set is printed every 2,000 rounds.
Anything the server keeps per commit or per write shows as a steady climb.

Usage: scripts/churn.py [--memd target/release/memd] [--rounds 12000]
                        [--corpus ../shared/eval/locomo-dev/corpus.jsonl]
"""
import argparse
import collections
import http.client
import json
import os
import shutil
import subprocess
import tempfile
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memd", default="target/release/memd")
    ap.add_argument("--rounds", type=int, default=12000)
    ap.add_argument("--live", type=int, default=2600)
    ap.add_argument("--corpus", default="../shared/eval/locomo-dev/corpus.jsonl")
    a = ap.parse_args()
    texts = [json.loads(line)["text"] for line in open(a.corpus, encoding="utf-8")]
    tmp = tempfile.mkdtemp(prefix="memd-churn-")
    root = os.path.join(tmp, "root")
    os.makedirs(root)
    with open(os.path.join(root, "config.json"), "w") as f:
        json.dump({"embedder": {"enabled": False}, "http": {"rateLimitPerMinute": 0}}, f)
    issued = subprocess.check_output(
        [a.memd, "token", "issue", "--root", root, "--name", "owner",
         "--preset", "dsh-desktop", "--json"])
    secret = json.loads(issued)["secret"]
    server = subprocess.Popen(
        [a.memd, "serve", "--listen", "127.0.0.1:0"],
        env={**os.environ, "MEMD_ROOT": root, "RUST_LOG": "warn"},
        stdout=subprocess.PIPE)
    try:
        line = ""
        while "http://" not in line:
            line = server.stdout.readline().decode()
            if not line:
                raise SystemExit("memd serve exited before listening")
        host, port = line.strip().split("http://")[1].split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        headers = {"authorization": "Bearer " + secret, "content-type": "application/json"}

        def post(path, body):
            conn.request("POST", path, json.dumps(body), headers)
            r = conn.getresponse()
            data = r.read()
            if r.status != 200:
                raise SystemExit(f"{path}: {r.status} {data[:200]!r}")
            return json.loads(data)

        def rss():
            status = open(f"/proc/{server.pid}/status").read()
            kib = {k.split(":")[0]: int(k.split()[1]) for k in status.splitlines()
                   if k.startswith(("VmRSS", "RssAnon"))}
            return f"rss {kib['VmRSS'] / 1024:.1f} MiB anon {kib['RssAnon'] / 1024:.1f} MiB"

        live = collections.deque()
        start = time.time()
        print("round seconds resident", flush=True)
        for i in range(a.rounds + 1):
            live.append(post("/v1/write", {"text": f"{texts[i % len(texts)]} ({i})"})["id"])
            if len(live) > a.live:
                post("/v1/forget", {"id": live.popleft()})
            query = texts[(i * 7) % len(texts)][:40]
            post("/v1/search", {"query": query, "limit": 10, "mode": "fulltext"})
            if i % 2000 == 0:
                print(f"{i} {time.time() - start:.0f} {rss()}", flush=True)
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
