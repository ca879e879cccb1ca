"""Settings of the memd bridge, read from the bot's `.env` like any NoneBot2 setting."""

from typing import Optional

from pydantic import BaseModel, field_validator


class Config(BaseModel):
    # Where `memd serve` listens (loopback on the bot's machine).
    memd_url: str = "http://127.0.0.1:8787"
    # One token per chat: "group:<group id>", "private:<user id>" and "owner" (the owner's own
    # private chat with the bot). Chats without a token are left alone.
    memd_tokens: dict[str, str] = {}
    # The owner's QQ ids: their messages are ingested with from_owner, and their questions
    # recall with from_owner (their own normal/personal memories join the group's).
    memd_owner_ids: list[str] = []
    # The qq-disclose token, for "what did the group say" in a private chat.
    memd_disclose_token: Optional[str] = None
    # Seconds one memd request may take; past that the bot goes on without memory.
    memd_timeout: float = 2.0
    # Turns per chat remembered locally to build the recall query (newest last).
    memd_history: int = 6
    # What recall gives the prompt when memd cannot be reached.
    memd_fallback: str = "（记忆服务暂时不可用，按当前对话回答）"

    @field_validator("memd_owner_ids", mode="before")
    @classmethod
    def _ids_as_strings(cls, v):
        if isinstance(v, (int, str)):
            v = [v]
        return [str(x) for x in v]

    @field_validator("memd_tokens", mode="before")
    @classmethod
    def _keys_as_strings(cls, v):
        return {str(k): str(t) for k, t in dict(v).items()}

    @field_validator("memd_url")
    @classmethod
    def _no_trailing_slash(cls, v: str) -> str:
        return v.rstrip("/")
