"""Test set-up: NoneBot2 with the OneBot v11 adapter and this plugin, pointed at a live memd.

The Rust integration test (tests/integration/examples.rs) starts `memd serve` on loopback, issues
the tokens with `memd token issue` and passes them here:

  MEMD_URL              http://127.0.0.1:PORT
  MEMD_TOKENS           {"group:123": "mh_…", "group:456": …, "private:10001": …, "owner": …}
  MEMD_DISCLOSE_TOKEN   the qq-disclose token
  MEMD_SEED_TOKEN       a dsh-desktop token (scene main): the owner's own memories
  MEMD_ROOT             the daemon's root, to read memories/groups/members.json
"""

import json
import os
import time
from pathlib import Path

import httpx
import nonebot
import pytest
from nonebug import NONEBOT_INIT_KWARGS

EVENTS = Path(__file__).parent / "events"
OWNER = 10000
SELF_ID = 3000000001


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise pytest.UsageError(
            f"{name} is not set: these tests run against a live memd; "
            "run them with `cargo nextest run --test integration examples::`"
        )
    return value


def pytest_configure(config: pytest.Config) -> None:
    config.stash[NONEBOT_INIT_KWARGS] = {
        "driver": "~none",
        "command_start": {"/"},
        "memd_url": _env("MEMD_URL"),
        "memd_tokens": json.loads(_env("MEMD_TOKENS")),
        "memd_owner_ids": [str(OWNER)],
        "memd_disclose_token": _env("MEMD_DISCLOSE_TOKEN"),
        # A debug build on a busy test machine; the tests of memd being away set their own.
        "memd_timeout": 15.0,
    }


@pytest.fixture(scope="session", autouse=True)
async def after_nonebot_init(after_nonebot_init: None) -> None:
    from nonebot.adapters.onebot.v11 import Adapter

    nonebot.get_driver().register_adapter(Adapter)
    nonebot.require("nonebot_plugin_memd")


@pytest.fixture
def bridge():
    from nonebot_plugin_memd import bridge

    return bridge


class Memd:
    """Direct `/v1` calls, to seed memories and to look at what the bridge stored."""

    def __init__(self):
        self.url = _env("MEMD_URL")
        self.tokens = json.loads(_env("MEMD_TOKENS"))
        self.seed_token = _env("MEMD_SEED_TOKEN")
        self.root = Path(_env("MEMD_ROOT"))

    def post(self, route: str, token: str, body: dict) -> dict:
        r = httpx.post(
            f"{self.url}{route}",
            json=body,
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
            trust_env=False,
        )
        assert r.status_code == 200, f"{route}: {r.status_code} {r.text}"
        return r.json()

    def short_term(self, chat: str) -> list[dict]:
        """The short-term memories a chat's own token can read, newest first."""
        return self.post("/v1/recent", self.tokens[chat], {"stage": "short", "limit": 50})["items"]

    def members(self, group: str) -> dict:
        path = self.root / "memories" / "groups" / "members.json"
        if not path.exists():
            return {}
        return json.loads(path.read_text())["groups"].get(group, {})


@pytest.fixture(scope="session")
def memd() -> Memd:
    return Memd()


def load_event(name: str, **overrides):
    """A OneBot v11 event as NapCat reports it, parsed by the adapter itself. Its `time` is
    replayed as now (short-term memory expires a day after a message was sent)."""
    from nonebot.adapters.onebot.v11 import Adapter

    data = json.loads((EVENTS / f"{name}.json").read_text())
    data["time"] = int(time.time())
    data.update(overrides)
    event = Adapter.json_to_event(data)
    assert event is not None, f"the adapter could not parse {name}.json"
    return event


def make_bot(ctx):
    from nonebot.adapters.onebot.v11 import Adapter, Bot

    adapter = ctx.create_adapter(base=Adapter)
    return ctx.create_bot(base=Bot, adapter=adapter, self_id=str(SELF_ID))


class Reply:
    """Matches a reply the bot sends when `check(text)` holds; keeps what was sent."""

    def __init__(self, description: str, check):
        self.description = description
        self.check = check
        self.sent = None

    def __eq__(self, other) -> bool:
        self.sent = str(other)
        return bool(self.check(self.sent))

    def __repr__(self) -> str:
        return f"<a reply that {self.description}>"
