#!/usr/bin/env python3
"""A desktop pet's memory, from memd (Python standard library only).

Each user turn asks `/v1/recall` in scene `pet` with the `live` side channel (what the owner is
saying to their main agent right now) and `format: "block"`; the block goes into the pet's
prompt. The pet writes its own notes (`subject: self`, scene `pet`). When memd is down or slow
the pet still answers: the memory part of its prompt becomes a fallback text.

    python3 memd_pet.py --url http://127.0.0.1:8787 --token-file ~/.config/memd/pet-token
    python3 memd_pet.py ... --llm-cmd "llm -m some-model"   # pipe each prompt to a command

Without `--llm-cmd` it prints the prompt it would send, which shows what memory it got.
"""

import argparse
import json
import os
import shlex
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Optional

FALLBACK = "（记忆暂时连不上：只按眼前的对话回答，不要编造过去的事）"

PERSONA = "你是主人桌面上的小宠物，说话简短、亲切。"


@dataclass
class Answer:
    """One memd call: `status` 0 means memd could not be reached in time."""

    status: int
    body: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def code(self) -> Optional[str]:
        if self.ok:
            return None
        return (self.body.get("error") or {}).get("code")


@dataclass
class Memory:
    """What goes into the prompt: `text` is the block ("" when nothing is relevant) or the
    fallback text when `ok` is false."""

    ok: bool
    text: str
    live: list = field(default_factory=list)
    hits: list = field(default_factory=list)


class PetMemory:
    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout: float = 1.5,
        live_scenes: tuple = ("main",),
        live_minutes: int = 30,
        live_k: int = 6,
        fallback: str = FALLBACK,
    ):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.live = {"k": live_k, "minutes": live_minutes, "scenes": list(live_scenes)}
        self.fallback = fallback
        # memd is on loopback: never go through a proxy from the environment.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def call(self, route: str, body: dict[str, Any]) -> Answer:
        request = urllib.request.Request(
            f"{self.url}{route}",
            data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
            method="POST",
        )
        try:
            with self._opener.open(request, timeout=self.timeout) as r:
                return Answer(r.status, _json(r.read()))
        except urllib.error.HTTPError as e:
            return Answer(e.code, _json(e.read()))
        except (OSError, ValueError) as e:  # refused, reset, timed out, bad URL
            print(f"memd_pet: memd {route}: {type(e).__name__}: {e}", file=sys.stderr)
            return Answer(0, {"error": {"code": "UNREACHABLE"}})

    def bootstrap(self) -> Optional[dict]:
        """At start-up: identity, the pet's audience card, recent titles, its own notes."""
        a = self.call("/v1/bootstrap", {"scene": "pet"})
        return a.body if a.ok else None

    def recall(self, turns: list[str]) -> Memory:
        """The memory for the next reply; `turns` are the last turns, newest last."""
        a = self.call(
            "/v1/recall",
            {"scene": "pet", "messages": turns[-6:], "live": self.live, "format": "block"},
        )
        if not a.ok:
            return Memory(False, self.fallback)
        return Memory(True, a.body.get("block", ""), a.body.get("live", []), a.body.get("hits", []))

    def note(self, text: str, **extra: Any) -> Answer:
        """A note of the pet about itself (`subject: self` in scene `pet`)."""
        return self.call("/v1/write", {"scene": "pet", "subject": "self", "text": text, **extra})


def _json(raw: bytes) -> dict:
    try:
        v = json.loads(raw or b"{}")
    except ValueError:
        return {}
    return v if isinstance(v, dict) else {}


class Pet:
    """The conversation loop: history, memory, prompt. `reply` turns a prompt into words."""

    def __init__(self, memory: PetMemory, reply=None):
        self.memory = memory
        self.history: list[str] = []
        self.reply = reply or (lambda prompt: prompt)

    def prompt(self, memory: Memory) -> str:
        parts = [PERSONA]
        if memory.text:
            parts.append(memory.text.strip())
        parts.append("\n".join(self.history[-6:]))
        parts.append("宠物：")
        return "\n\n".join(parts)

    def turn(self, user_text: str) -> tuple[str, Memory]:
        self.history.append(f"主人：{user_text}")
        memory = self.memory.recall(self.history)
        said = self.reply(self.prompt(memory)).strip()
        self.history.append(f"宠物：{said}")
        return said, memory


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default=os.environ.get("MEMD_URL", "http://127.0.0.1:8787"))
    p.add_argument("--token", default=os.environ.get("MEMD_TOKEN"))
    p.add_argument("--token-file", default=os.environ.get("MEMD_TOKEN_FILE"))
    p.add_argument("--timeout", type=float, default=1.5, help="seconds per memd request")
    p.add_argument("--llm-cmd", help="a command that reads a prompt on stdin and prints the reply")
    args = p.parse_args(argv)
    token = args.token
    if not token and args.token_file:
        with open(os.path.expanduser(args.token_file)) as f:
            token = f.readline().strip()
    if not token:
        p.error("give the pet token with --token, --token-file, MEMD_TOKEN or MEMD_TOKEN_FILE")

    def llm(prompt: str) -> str:
        if not args.llm_cmd:
            return "（没有接模型；这是会发给模型的提示）\n" + prompt
        out = subprocess.run(shlex.split(args.llm_cmd), input=prompt, capture_output=True, text=True, timeout=120)
        return out.stdout

    memory = PetMemory(args.url, token, timeout=args.timeout)
    boot = memory.bootstrap()
    if boot is None:
        print(FALLBACK)
    else:
        print(f"（记得 {len(boot.get('recent_self') or [])} 条自己的笔记）")
    pet = Pet(memory, llm)
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        if line.startswith("/note "):
            a = memory.note(line[len("/note ") :])
            print("记下了。" if a.ok else f"没记下：{a.code}")
            continue
        said, _ = pet.turn(line)
        print(said, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
