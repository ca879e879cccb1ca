"""What the bridge does with OneBot v11 events, independent of the matchers that call it.

- A chat maps to its memd token: `group:<id>`, `private:<id>`, or `owner` for the owner's own
  private chat. A chat without a token is left alone (memd never hears of it).
- Every message becomes `/v1/ingest` (short-term memory) in the background, so the bot never
  waits for memd; `drain()` waits for what is in flight.
- Before a reply, `recall()` asks `/v1/recall` with the chat's last turns, `person` and
  `format: "block"`; when memd cannot be reached it gives the configured fallback text.
"""

import asyncio
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Optional, Union

from nonebot import logger
from nonebot.adapters.onebot.v11 import (
    Event,
    GroupMessageEvent,
    Message,
    MessageEvent,
    MessageSegment,
    PrivateMessageEvent,
)

from .client import Memd, Reply
from .config import Config

# How media and other non-text segments read in memory. memd drops messages made only of such
# placeholders (SKIP) and strips them from real messages.
PLACEHOLDERS = {
    "face": "[表情]",
    "mface": "[表情]",
    "marketface": "[表情]",
    "dice": "[表情]",
    "rps": "[表情]",
    "image": "[图片]",
    "record": "[语音]",
    "video": "[视频]",
    "file": "[文件]",
    "forward": "[聊天记录]",
    "json": "[卡片]",
    "xml": "[卡片]",
    "poke": "[戳一戳]",
}


@dataclass(frozen=True)
class Chat:
    key: str  # the key of memd_tokens
    scene: str  # the memd scene its token reads and writes
    group_id: Optional[int] = None
    user_id: Optional[int] = None


@dataclass
class Recall:
    """What recall gives a reply: `text` goes into the prompt (the block, "" when nothing is
    relevant, or the fallback text); `ok` is false when memd could not answer."""

    ok: bool
    text: str
    hits: list[dict[str, Any]]
    query: str = ""


def render(message: Union[Message, str], self_id: Optional[str] = None) -> str:
    """Plain text of a OneBot message as memd should see it."""
    if isinstance(message, str):
        message = Message(message)
    parts: list[str] = []
    for seg in message:
        t = seg.type
        if t == "text":
            parts.append(seg.data.get("text", ""))
        elif t == "at":
            qq = str(seg.data.get("qq", ""))
            if self_id is not None and qq == str(self_id):
                continue  # addressing the bot is not content
            name = seg.data.get("name") or qq
            parts.append(f"@{name}")
        elif t == "reply":
            continue
        elif t == "image" and str(seg.data.get("sub_type", "0")) == "1":
            parts.append("[动画表情]")
        else:
            parts.append(PLACEHOLDERS.get(t, f"[CQ:{t}]"))
    return "".join(parts).strip()


def rfc3339(unix_seconds: Optional[int]) -> str:
    if unix_seconds:
        return datetime.fromtimestamp(unix_seconds, tz=timezone.utc).astimezone().isoformat()
    return datetime.now().astimezone().isoformat()


class Bridge:
    def __init__(self, config: Config):
        self.config = config
        self.memd = Memd(config.memd_url, config.memd_timeout)
        self.owners = set(config.memd_owner_ids)
        self.history: dict[str, deque] = {}
        # (chat key, message id, memd action or error code), newest last: for logs and tests.
        self.outcomes: deque = deque(maxlen=200)
        self._tasks: set[asyncio.Task] = set()

    # -- chats and tokens ---------------------------------------------------------------

    def chat_of(self, event: Event) -> Optional[Chat]:
        if isinstance(event, GroupMessageEvent) or (
            getattr(event, "group_id", None) is not None and hasattr(event, "user_id")
        ):
            gid = int(event.group_id)  # type: ignore[attr-defined]
            return Chat(f"group:{gid}", f"qq:group:{gid}", group_id=gid)
        if isinstance(event, PrivateMessageEvent):
            return self.private_chat(event.user_id)
        return None

    def private_chat(self, user_id: int) -> Chat:
        uid = str(user_id)
        if uid in self.owners and "owner" in self.config.memd_tokens:
            return Chat("owner", "qq:owner", user_id=int(user_id))
        return Chat(f"private:{uid}", f"qq:private:{uid}", user_id=int(user_id))

    def token(self, chat: Chat) -> Optional[str]:
        return self.config.memd_tokens.get(chat.key)

    def is_owner(self, user_id: Any) -> bool:
        return str(user_id) in self.owners

    # -- background work ----------------------------------------------------------------

    def spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Wait until every background call has finished (each is bounded by the timeout)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        await self.drain()
        await self.memd.close()

    # -- ingest ---------------------------------------------------------------------------

    def remember_turn(self, chat: Chat, name: str, text: str) -> str:
        """Keeps a turn for the chat's next recall query, at once (before memd answers), so a
        reply to this very message already recalls with it."""
        turns = self.history.setdefault(chat.key, deque(maxlen=max(1, self.config.memd_history)))
        turn = f"{name}：{text}"
        turns.append(turn)
        return turn

    def forget_turn(self, chat: Chat, turn: str) -> None:
        turns = self.history.get(chat.key)
        if turns is not None and turn in turns:
            turns.remove(turn)

    async def ingest(
        self,
        chat: Chat,
        *,
        message_id: Any,
        text: str,
        sender_id: Any,
        sender_name: str,
        sent_at: Optional[int],
        from_self: bool = False,
    ) -> Optional[Reply]:
        token = self.token(chat)
        if token is None or not text:
            return None
        body: dict[str, Any] = {
            "message_id": str(message_id),
            "text": text,
            "sender": {"id": str(sender_id), "name": sender_name or str(sender_id)},
            "sent_at": rfc3339(sent_at),
            # The turns of one chat on one day are searchable context for each other.
            "session": f"{chat.scene}:{datetime.now().astimezone().date().isoformat()}",
        }
        if from_self:
            body["from_self"] = True
        elif self.is_owner(sender_id):
            body["from_owner"] = True
        reply = await self.memd.post("/v1/ingest", token, body)
        action = reply.body.get("action") if reply.ok else reply.code
        self.outcomes.append((chat.key, str(message_id), action))
        if action in ("SKIP", "NOOP"):  # noise and redeliveries stay out of the recall query
            self.forget_turn(chat, f"{sender_name or sender_id}：{text}")
        return reply

    def ingest_event(self, event: MessageEvent) -> None:
        chat = self.chat_of(event)
        if chat is None or self.token(chat) is None:
            return
        sender = event.sender
        name = (sender.card or sender.nickname or str(event.user_id)) if sender else str(event.user_id)
        text = render(event.original_message, str(event.self_id))
        if not text:
            return
        self.remember_turn(chat, name, text)
        self.spawn(
            self.ingest(
                chat,
                message_id=event.message_id,
                text=text,
                sender_id=event.user_id,
                sender_name=name,
                sent_at=event.time,
                from_self=str(event.user_id) == str(event.self_id),
            )
        )

    def ingest_sent(self, self_id: str, data: dict[str, Any], result: Any) -> None:
        """The bot's own message, after `send_msg`/`send_group_msg`/`send_private_msg` succeeded."""
        if not isinstance(result, dict) or "message_id" not in result:
            return
        group_id = data.get("group_id")
        if data.get("message_type") == "private" or (group_id is None and data.get("user_id") is not None):
            chat = self.private_chat(int(data["user_id"]))
        elif group_id is not None:
            chat = Chat(f"group:{int(group_id)}", f"qq:group:{int(group_id)}", group_id=int(group_id))
        else:
            return
        text = render(data.get("message", ""), self_id)
        if not text or self.token(chat) is None:
            return
        self.remember_turn(chat, "我", text)
        self.spawn(
            self.ingest(
                chat,
                message_id=result["message_id"],
                text=text,
                sender_id=self_id,
                sender_name="我",
                sent_at=None,
                from_self=True,
            )
        )

    # -- recall ---------------------------------------------------------------------------

    async def recall(self, event: MessageEvent, query: Optional[str] = None, *, for_prompt: bool = True) -> Recall:
        """The memory block for a reply to `event` (its chat's token, its sender as `person`).

        For a prompt, the owner asking in a group or a private chat also gets their own
        normal/personal memories (`from_owner`). A reply shown as is in the chat
        (`for_prompt=False`) never includes them."""
        chat = self.chat_of(event)
        token = self.token(chat) if chat else None
        if chat is None or token is None:
            return Recall(True, "", [])
        turns = list(self.history.get(chat.key, ()))
        if query:
            name = event.sender.card or event.sender.nickname if event.sender else None
            turns.append(f"{name or event.user_id}：{query}")
        if not turns:
            return Recall(True, "", [])
        body: dict[str, Any] = {
            "messages": turns,
            "person": str(event.user_id),
            "format": "block",
        }
        if for_prompt and self.is_owner(event.user_id) and chat.key != "owner":
            body["from_owner"] = True
        reply = await self.memd.post("/v1/recall", token, body)
        if not reply.ok:
            return Recall(False, self.config.memd_fallback, [])
        return Recall(True, reply.body.get("block", ""), reply.body.get("hits", []), reply.body.get("query", ""))

    # -- membership and disclosure --------------------------------------------------------

    async def members(self, group_id: int, body: dict[str, Any]) -> Optional[Reply]:
        chat = Chat(f"group:{group_id}", f"qq:group:{group_id}", group_id=group_id)
        token = self.token(chat)
        if token is None:
            return None
        reply = await self.memd.post("/v1/members", token, {"group": chat.scene, **body})
        self.outcomes.append((chat.key, "members", reply.code if not reply.ok else "OK"))
        return reply

    async def disclose(self, group_id: int, asker: int) -> Reply:
        token = self.config.memd_disclose_token
        if not token:
            return Reply(403, {"error": {"code": "FORBIDDEN"}})
        return await self.memd.post(
            "/v1/disclose",
            token,
            {"group": f"qq:group:{group_id}", "asker": str(asker), "format": "block"},
        )

    async def remember(self, event: MessageEvent, text: str) -> Reply:
        """The owner asked the bot to remember something: a long-term write in this chat's scene,
        keyed by the message id so a redelivered command does not write twice."""
        chat = self.chat_of(event)
        token = self.token(chat) if chat else None
        if chat is None or token is None:
            return Reply(403, {"error": {"code": "FORBIDDEN"}})
        return await self.memd.post(
            "/v1/write",
            token,
            {"text": text, "idempotency_key": f"qq-{chat.key}-{event.message_id}"},
        )

    def log_unreachable(self, what: str) -> None:
        logger.info(f"memd unreachable during {what}; the bot goes on without memory")
