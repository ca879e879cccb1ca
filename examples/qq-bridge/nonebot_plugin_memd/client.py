"""A small memd `/v1` client that never raises: memd being down must not break the bot."""

from dataclasses import dataclass, field
from typing import Any, Optional

import httpx
from nonebot import logger


@dataclass
class Reply:
    """One memd answer. `ok` is false for HTTP errors and for memd being unreachable
    (`status` 0, `code` "UNREACHABLE" or "TIMEOUT")."""

    status: int
    body: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def reachable(self) -> bool:
        return self.status != 0

    @property
    def code(self) -> Optional[str]:
        if self.ok:
            return None
        return (self.body.get("error") or {}).get("code")


class Memd:
    def __init__(self, url: str, timeout: float):
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._client: Optional[httpx.AsyncClient] = None

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            # No proxies from the environment: memd is on loopback.
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(self.timeout), trust_env=False)
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def post(self, route: str, token: str, body: dict[str, Any]) -> Reply:
        try:
            r = await self._http().post(
                f"{self.url}{route}", json=body, headers={"Authorization": f"Bearer {token}"}
            )
        except httpx.TimeoutException:
            logger.warning(f"memd {route}: no answer within {self.timeout} s")
            return Reply(0, {"error": {"code": "TIMEOUT"}})
        except httpx.HTTPError as e:
            logger.warning(f"memd {route}: unreachable ({type(e).__name__})")
            return Reply(0, {"error": {"code": "UNREACHABLE"}})
        try:
            data = r.json()
        except ValueError:
            data = {}
        if not isinstance(data, dict):
            data = {}
        reply = Reply(r.status_code, data)
        if not reply.ok and reply.code != "FORBIDDEN":
            logger.warning(f"memd {route}: {r.status_code} {reply.code}")
        return reply
