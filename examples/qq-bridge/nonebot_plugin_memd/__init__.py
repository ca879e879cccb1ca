"""memd for a NoneBot2 QQ bot (OneBot v11: NapCat, LLOneBot, Lagrange, go-cqhttp).

Every message of a chat that has a memd token is ingested as short-term memory; the bot's own
messages too (`from_self`), the owner's with `from_owner`. Group joins and leaves go to
`/v1/members`. Commands:

- `/回忆 [话题]`: what the bot remembers for this chat (the recall block);
- `/群聊 <群号>` in a private chat: what a group said recently, for a member of that group only
  (`/v1/disclose`);
- `/记住 <内容>` (owner only): a long-term memory in this chat's scene;
- `/同步成员` (owner only, in a group): the full member list to `/v1/members`.

Another plugin (an LLM chat plugin) puts memory into its prompt with::

    from nonebot import require
    require("nonebot_plugin_memd")
    from nonebot_plugin_memd import recall_for

    memory = await recall_for(event)      # .text: block, "" or the fallback text
"""

from typing import Any, Optional

from nonebot import get_driver, get_plugin_config, logger, on_command, on_message, on_notice
from nonebot.adapters import Bot as BaseBot
from nonebot.adapters.onebot.v11 import (
    Bot,
    GroupDecreaseNoticeEvent,
    GroupIncreaseNoticeEvent,
    GroupMessageEvent,
    Message,
    MessageEvent,
    PrivateMessageEvent,
)
from nonebot.params import CommandArg
from nonebot.plugin import PluginMetadata

from .bridge import Bridge, Recall
from .config import Config

__plugin_meta__ = PluginMetadata(
    name="memd",
    description="QQ 聊天接入 memd 记忆服务：消息入短期记忆、回复前召回、成员变动与群聊披露",
    usage="/回忆 [话题]　/群聊 <群号>（私聊）　/记住 <内容>（主人）　/同步成员（主人，群内）",
    type="application",
    config=Config,
    supported_adapters={"~onebot.v11"},
)

bridge = Bridge(get_plugin_config(Config))
driver = get_driver()

NOTHING = "我还不记得和这个有关的事。"
NOT_A_MEMBER = "只有这个群的成员才能问群里聊了什么。"


@driver.on_shutdown
async def _close() -> None:
    await bridge.close()


async def recall_for(event: MessageEvent, query: Optional[str] = None) -> Recall:
    """The memory for a reply to `event`: never raises, never waits longer than memd_timeout."""
    return await bridge.recall(event, query)


# Every message, before any other plugin sees it; never blocks them.
_ingest = on_message(priority=1, block=False)


@_ingest.handle()
async def _ingest_message(event: MessageEvent) -> None:
    bridge.ingest_event(event)


# What the bot itself sends, whichever plugin sent it.
@BaseBot.on_called_api
async def _ingest_own_message(
    bot: BaseBot, exception: Optional[Exception], api: str, data: dict[str, Any], result: Any
) -> None:
    if exception is None and isinstance(bot, Bot) and api in ("send_msg", "send_group_msg", "send_private_msg"):
        bridge.ingest_sent(bot.self_id, data, result)


_membership = on_notice(priority=1, block=False)


@_membership.handle()
async def _members(event: GroupIncreaseNoticeEvent | GroupDecreaseNoticeEvent) -> None:
    if str(event.user_id) == str(event.self_id):
        return  # the bot itself joined or left
    if isinstance(event, GroupIncreaseNoticeEvent):
        body = {"add": [{"id": str(event.user_id)}]}
    else:
        body = {"remove": [str(event.user_id)]}
    bridge.spawn(bridge.members(event.group_id, body))


_recall = on_command("回忆", aliases={"recall"}, priority=5, block=True)


@_recall.handle()
async def _recall_command(event: MessageEvent, arg: Message = CommandArg()) -> None:
    # The block is shown in the chat itself: without the owner's own memories.
    memory = await bridge.recall(event, arg.extract_plain_text().strip() or None, for_prompt=False)
    await _recall.finish(memory.text.strip() or NOTHING)


_disclose = on_command("群聊", aliases={"disclose"}, priority=5, block=True)


@_disclose.handle()
async def _disclose_command(event: PrivateMessageEvent, arg: Message = CommandArg()) -> None:
    group = arg.extract_plain_text().strip()
    if not group.isdigit():
        await _disclose.finish("用法：/群聊 <群号>")
    reply = await bridge.disclose(int(group), event.user_id)
    if reply.ok:
        await _disclose.finish(reply.body.get("block", "").strip() or "群里最近没有聊什么。")
    if reply.code == "FORBIDDEN":
        await _disclose.finish(NOT_A_MEMBER)
    await _disclose.finish(bridge.config.memd_fallback)


_remember = on_command("记住", aliases={"remember"}, priority=5, block=True)


@_remember.handle()
async def _remember_command(event: MessageEvent, arg: Message = CommandArg()) -> None:
    if not bridge.is_owner(event.user_id):
        await _remember.finish()
    text = arg.extract_plain_text().strip()
    if not text:
        await _remember.finish("用法：/记住 <内容>")
    reply = await bridge.remember(event, text)
    if reply.ok:
        await _remember.finish("记住了。")
    await _remember.finish(bridge.config.memd_fallback if not reply.reachable else f"没记住：{reply.code}")


_sync = on_command("同步成员", priority=5, block=True)


@_sync.handle()
async def _sync_members(bot: Bot, event: GroupMessageEvent) -> None:
    if not bridge.is_owner(event.user_id):
        await _sync.finish()
    members = await bot.get_group_member_list(group_id=event.group_id)
    everyone = [
        {"id": str(m["user_id"]), "name": m.get("card") or m.get("nickname") or str(m["user_id"])}
        for m in members
        if str(m["user_id"]) != str(bot.self_id)
    ]
    reply = await bridge.members(event.group_id, {"set": everyone})
    if reply is not None and reply.ok:
        await _sync.finish(f"已同步 {len(everyone)} 位成员。")
    logger.warning("memd: member sync failed")
    await _sync.finish(bridge.config.memd_fallback)


__all__ = ["Config", "Recall", "bridge", "recall_for"]
