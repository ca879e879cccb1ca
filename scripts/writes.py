#!/usr/bin/env python3
"""Durable single writes, timed: a real `memd serve` (embedder off, no rate
limit) in a fresh root, PREFILL LoCoMo lines written into scene `main`
first, then N more timed one by one over HTTP (each reply comes after the
journal's fsync). Prints the p50 and p95 of the N and the server's CPU per
timed write (user + system, from /proc/PID/stat, all threads).

Several builds are compared by naming each with --memd; they run in turn,
--rounds times, so a machine shared with other work loads them alike.

Usage: scripts/writes.py [--memd target/release/memd ...] [--prefill 0 2000]
                         [--n 300] [--rounds 3]
                         [--corpus ../shared/eval/locomo-dev/corpus.jsonl]
"""
import argparse
import http.client
import json
import os
import shutil
import subprocess
import tempfile
import time

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """User + system time of the process (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def run(memd, texts, prefill, timed):
    tmp = tempfile.mkdtemp(prefix="memd-w-")
    try:
        root = os.path.join(tmp, "root")
        os.makedirs(root)
        config = {"embedder": {"enabled": False}, "http": {"rateLimitPerMinute": 0}}
        with open(os.path.join(root, "config.json"), "w") as f:
            json.dump(config, f)
        token = subprocess.check_output(
            [memd, "token", "issue", "--root", root, "--name", "owner",
             "--preset", "dsh-desktop", "--json"])
        secret = json.loads(token)["secret"]
        env = {**os.environ, "MEMD_ROOT": root, "RUST_LOG": "warn"}
        server = subprocess.Popen([memd, "serve", "--listen", "127.0.0.1:0"],
                                  env=env, stdout=subprocess.PIPE)
        try:
            return timed_writes(server, secret, texts, prefill, timed)
        finally:
            server.terminate()
            server.wait()
    finally:
        shutil.rmtree(tmp)


def timed_writes(server, secret, texts, prefill, timed):
    line = ""
    while "http://" not in line:
        line = server.stdout.readline().decode()
    host, port = line.strip().split("http://")[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    headers = {"authorization": "Bearer " + secret, "content-type": "application/json"}

    def post(path, body):
        conn.request("POST", path, json.dumps(body), headers)
        r = conn.getresponse()
        data = r.read()
        assert r.status == 200, data

    for i in range(prefill):
        post("/v1/write", {"text": f"{texts[i % len(texts)]} ({i})", "scene": "main"})
    time.sleep(2)
    cpu0 = cpu_seconds(server.pid)
    ts = []
    for i in range(timed):
        t = time.perf_counter()
        post("/v1/write", {"text": f"{texts[(i * 13) % len(texts)]} [{i}]", "scene": "main"})
        ts.append((time.perf_counter() - t) * 1000)
    cpu = (cpu_seconds(server.pid) - cpu0) * 1000 / timed
    ts.sort()
    return ts[len(ts) // 2], ts[int(len(ts) * 0.95)], cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memd", action="append")
    ap.add_argument("--prefill", type=int, nargs="+", default=[0, 2000])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--corpus", default="../shared/eval/locomo-dev/corpus.jsonl")
    a = ap.parse_args()
    builds = a.memd or ["target/release/memd"]
    with open(a.corpus, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f]
    for r in range(a.rounds):
        for prefill in a.prefill:
            for memd in builds:
                p50, p95, cpu = run(memd, texts, prefill, a.n)
                print(f"round {r + 1} prefill {prefill:5} {memd}: p50 {p50:.2f} ms "
                      f"p95 {p95:.2f} ms cpu/write {cpu:.2f} ms", flush=True)


if __name__ == "__main__":
    main()
