"""The bridge on recorded OneBot v11 events, through NoneBot's own test framework (nonebug),
against a live `memd serve`. Each test asserts what memd stored and what the bot sent."""

import asyncio
import socket
import time

import pytest
from conftest import OWNER, SELF_ID, Reply, load_event, make_bot
from nonebug import App


def texts(items):
    return [i["text"] for i in items]


async def deliver(app: App, bridge, name: str, **overrides):
    """One event through every matcher, expecting no reply; then memd has what was ingested."""
    async with app.test_matcher() as ctx:
        bot = make_bot(ctx)
        ctx.receive_event(bot, load_event(name, **overrides))
    await bridge.drain()


async def test_group_message_is_ingested_once_and_noise_is_skipped(app: App, bridge, memd):
    await deliver(app, bridge, "group_message")
    stored = [i for i in memd.short_term("group:123") if i["text"] == "周末去爬山吗"]
    assert len(stored) == 1, stored
    m = stored[0]
    assert m["scene"] == "qq:group:123" and m["kind"] == "chat" and m["stage"] == "short"
    assert m["speaker"] == "王同学"  # the group card wins over the nickname
    assert "from:10001" in m["tags"] and m["subject"] == "other"
    assert bridge.outcomes[-1] == ("group:123", "1870001", "ADD")

    # The same event delivered again (a reconnecting OneBot implementation does that).
    await deliver(app, bridge, "group_message")
    assert bridge.outcomes[-1] == ("group:123", "1870001", "NOOP")
    assert texts(memd.short_term("group:123")).count("周末去爬山吗") == 1

    # A QQ face alone, and an animated sticker alone: memd answers SKIP, nothing is stored.
    before = len(memd.short_term("group:123"))
    await deliver(app, bridge, "group_sticker")
    assert bridge.outcomes[-1] == ("group:123", "1870003", "SKIP")
    await deliver(app, bridge, "group_image_sticker")
    assert bridge.outcomes[-1] == ("group:123", "1870004", "SKIP")
    assert len(memd.short_term("group:123")) == before

    # A reply with an @mention: the quoted reply is dropped, the mention reads as a name.
    await deliver(app, bridge, "group_reply_mention")
    assert "@王同学 去哪座山？我上次去了香山" in texts(memd.short_term("group:123"))

    # Every sender the bridge ingested is now a known member of the group.
    assert {"10001", "10002"} <= set(memd.members("qq:group:123"))


async def test_owner_is_recognised_and_group_never_sees_owner_memories(app: App, bridge, memd):
    # The owner's own memories, written by their main agent (scene main).
    memd.post("/v1/write", memd.seed_token, {"text": "林周末常去香山爬山，最喜欢秋天的红叶"})
    memd.post("/v1/write", memd.seed_token, {"text": "林的爬山搭子是大学室友阿杰"})
    await deliver(app, bridge, "group_message")
    await deliver(app, bridge, "group_owner")
    owner_msg = [i for i in memd.short_term("group:123") if i["text"].startswith("我下周去杭州出差")]
    assert len(owner_msg) == 1 and owner_msg[0]["subject"] == "owner", owner_msg

    # A member asks: the block has the group's chat and nothing from the owner's scene.
    member_sees = Reply("has the group's chat and none of the owner's memories",
                        lambda t: "周末去爬山吗" in t and "红叶" not in t and "阿杰" not in t)
    async with app.test_matcher() as ctx:
        bot = make_bot(ctx)
        event = load_event("group_member_asks")
        ctx.receive_event(bot, event)
        ctx.should_call_send(event, member_sees, result={"message_id": 1880001})
        ctx.should_finished()
    assert "【近期聊天】" in member_sees.sent and "【长期记忆】" not in member_sees.sent, member_sees.sent

    # The owner asks the same with the command: the answer is shown in the group, so it
    # still leaves out the owner's own memories.
    shown = Reply("has the group's chat and none of the owner's memories",
                  lambda t: "周末去爬山吗" in t and "红叶" not in t and "阿杰" not in t)
    async with app.test_matcher() as ctx:
        bot = make_bot(ctx)
        event = load_event("group_owner_asks")
        ctx.receive_event(bot, event)
        ctx.should_call_send(event, shown, result={"message_id": 1880002})
        ctx.should_finished()

    # What an LLM plugin injects for the owner's message (from_owner) has their memories;
    # for a member's message it has none of them.
    from nonebot_plugin_memd import recall_for

    # A reply to a message recalls with that message, even before memd has stored it.
    async with app.test_matcher() as ctx:
        bot = make_bot(ctx)
        ctx.receive_event(bot, load_event("group_owner"))
    right_away = await recall_for(load_event("group_owner"))
    assert right_away.query.endswith("群主林：我下周去杭州出差，周末爬不了山了"), right_away
    await bridge.drain()

    for_owner = await recall_for(load_event("group_owner"), "周末爬山")
    assert for_owner.ok and "红叶" in for_owner.text and "【长期记忆】" in for_owner.text, for_owner
    for_member = await recall_for(load_event("group_message"), "周末爬山")
    assert for_member.ok and "周末去爬山吗" in for_member.text, for_member
    assert "红叶" not in for_member.text and "阿杰" not in for_member.text, for_member

    # The other group's token reads neither group 123's chat nor the owner's memories.
    await deliver(app, bridge, "other_group_message")
    other = texts(memd.short_term("group:456"))
    assert "下周五交读书笔记，别忘了" in other
    assert not any("爬山" in t or "杭州" in t for t in other), other


async def test_private_chats_use_their_own_tokens(app: App, bridge, memd):
    await deliver(app, bridge, "private_message")
    assert "我最近在学吉他，手指好疼" in texts(memd.short_term("private:10001"))
    assert "我最近在学吉他，手指好疼" not in texts(memd.short_term("group:123"))

    # The owner's private chat goes to the qq-owner token (scene qq:owner).
    await deliver(app, bridge, "private_owner")
    mine = [i for i in memd.short_term("owner") if i["text"] == "提醒我明天给妈妈打电话"]
    assert len(mine) == 1 and mine[0]["scene"] == "qq:owner" and mine[0]["subject"] == "owner", mine

    # A private chat without a token is left alone: nothing is sent anywhere.
    n = len(bridge.outcomes)
    await deliver(app, bridge, "private_message", user_id=10077, sender={"user_id": 10077, "nickname": "无名"})
    assert len(bridge.outcomes) == n


async def test_the_bots_own_messages_are_ingested_from_self(app: App, bridge, memd):
    async with app.test_api() as ctx:
        bot = make_bot(ctx)
        ctx.should_call_api(
            "send_group_msg", {"group_id": 123, "message": "好的，周六早上见"}, result={"message_id": 1890001}
        )
        await bot.send_group_msg(group_id=123, message="好的，周六早上见")
    await bridge.drain()
    mine = [i for i in memd.short_term("group:123") if i["text"] == "好的，周六早上见"]
    assert len(mine) == 1 and mine[0]["subject"] == "self", mine
    assert f"from:{SELF_ID}" in mine[0]["tags"]
    assert str(SELF_ID) not in memd.members("qq:group:123")


async def test_membership_events_gate_disclosure(app: App, bridge, memd):
    await deliver(app, bridge, "other_group_message")

    # 10006 joins group 456 and asks in private what the group talked about.
    await deliver(app, bridge, "group_increase")
    assert "10006" in memd.members("qq:group:456")
    told = Reply("discloses group 456's chat", lambda t: "【群里最近在聊的】" in t and "读书笔记" in t)
    async with app.test_matcher() as ctx:
        bot = make_bot(ctx)
        event = load_event("private_disclose")
        ctx.receive_event(bot, event)
        ctx.should_call_send(event, told, result={"message_id": 2880001})
        ctx.should_finished()
    assert "qq:group:456" in told.sent and "爬山" not in told.sent, told.sent

    # After leaving, the same question is refused; so is a stranger's.
    await deliver(app, bridge, "group_decrease")
    assert "10006" not in memd.members("qq:group:456")
    for name in ("private_disclose", "private_disclose_stranger"):
        async with app.test_matcher() as ctx:
            bot = make_bot(ctx)
            event = load_event(name)
            ctx.receive_event(bot, event)
            ctx.should_call_send(event, "只有这个群的成员才能问群里聊了什么。", result={"message_id": 2880002})
            ctx.should_finished()


async def test_owner_syncs_members_and_remembers(app: App, bridge, memd):
    async with app.test_matcher() as ctx:
        bot = make_bot(ctx)
        event = load_event("other_group_owner_sync")
        ctx.receive_event(bot, event)
        ctx.should_call_api(
            "get_group_member_list",
            {"group_id": 456},
            result=[
                {"group_id": 456, "user_id": OWNER, "nickname": "林", "card": "群主林", "role": "owner"},
                {"group_id": 456, "user_id": 10005, "nickname": "小赵", "card": "", "role": "member"},
                {"group_id": 456, "user_id": SELF_ID, "nickname": "机器人", "card": "", "role": "admin"},
            ],
        )
        ctx.should_call_send(event, "已同步 2 位成员。", result={"message_id": 1880003})
        ctx.should_finished()
    assert set(memd.members("qq:group:456")) == {str(OWNER), "10005"}

    # The owner's "remember" becomes a long-term memory of the group; a member's is ignored.
    async with app.test_matcher() as ctx:
        bot = make_bot(ctx)
        event = load_event("group_owner_remember")
        ctx.receive_event(bot, event)
        ctx.should_call_send(event, "记住了。", result={"message_id": 1880004})
        ctx.should_finished()
        event = load_event("group_member_remember")
        ctx.receive_event(bot, event)
        ctx.should_finished()
    hits = memd.post("/v1/search", memd.tokens["group:123"], {"query": "集合", "mode": "fulltext"})["hits"]
    long_term = [h for h in hits if h["stage"] == "long"]
    assert texts(long_term) == ["群里周六早上八点在地铁站集合"], hits
    hits = memd.post("/v1/search", memd.tokens["group:123"], {"query": "小李是群主", "mode": "fulltext"})["hits"]
    assert not [h for h in hits if h["stage"] == "long"], hits


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture
def memd_elsewhere(bridge, monkeypatch):
    """Point the bridge at another address for one test."""
    from nonebot_plugin_memd.client import Memd

    def point(url: str, timeout: float):
        monkeypatch.setattr(bridge, "memd", Memd(url, timeout))

    yield point


async def test_memd_down_or_silent_never_breaks_the_bot(app: App, bridge, memd_elsewhere):
    fallback = bridge.config.memd_fallback

    async def ask_and_time() -> float:
        started = time.monotonic()
        async with app.test_matcher() as ctx:
            bot = make_bot(ctx)
            ctx.receive_event(bot, load_event("group_message"))
            event = load_event("group_member_asks")
            ctx.receive_event(bot, event)
            ctx.should_call_send(event, fallback, result={"message_id": 1880009})
            ctx.should_finished()
        await bridge.drain()
        return time.monotonic() - started

    # Nothing listens: the bot still answers, with the fallback text, at once (well within
    # the timeout).
    memd_elsewhere(f"http://127.0.0.1:{closed_port()}", 10.0)
    assert await ask_and_time() < 5.0
    assert bridge.outcomes[-1][2] == "UNREACHABLE"

    # Something listens but never answers: the bot answers after the timeout.
    async def silent(reader, writer):
        await asyncio.sleep(30)
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        memd_elsewhere(f"http://127.0.0.1:{port}", 0.5)
        took = await ask_and_time()
        assert 0.4 < took < 8.0, took
        assert bridge.outcomes[-1][2] == "TIMEOUT"
    finally:
        server.close()
