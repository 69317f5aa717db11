"""Authorization for HTTP MCP servers: the tokens an `auth=` flow (the MCP SDK's OAuth
providers) obtains are secrets, added to the server's redactor as its token storage sees them,
so that they never show in its warnings, log records, errors or tools' results."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["watch_tokens"]

Found = Callable[[Iterable[str | None]], None]
"""Told of the secrets a storage holds: tokens, a client secret."""


def watch_tokens(auth: Any, found: Found) -> None:
    """Route `auth`'s token storage (an SDK `OAuthClientProvider`'s, or a subclass's) through
    `_Watched`, so that `found` hears of every token stored or loaded; a flow of another kind is
    left as it is (its secrets are the user's to name in `secrets=`)."""
    context: Any = getattr(auth, "context", None)
    storage = getattr(context, "storage", None)
    if storage is not None and not isinstance(storage, _Watched):
        context.storage = _Watched(storage, found)
        # Tokens loaded before (a provider used for another server) are secrets too.
        _tokens(getattr(context, "current_tokens", None), found)


class _Watched:
    """A `TokenStorage` that tells `found` of each secret passing through it."""

    def __init__(self, storage: Any, found: Found) -> None:
        self._storage = storage
        self._found = found

    async def get_tokens(self) -> Any:
        tokens = await self._storage.get_tokens()
        _tokens(tokens, self._found)
        return tokens

    async def set_tokens(self, tokens: Any) -> None:
        _tokens(tokens, self._found)
        await self._storage.set_tokens(tokens)

    async def get_client_info(self) -> Any:
        info = await self._storage.get_client_info()
        self._found([getattr(info, "client_secret", None)])
        return info

    async def set_client_info(self, client_info: Any) -> None:
        self._found([getattr(client_info, "client_secret", None)])
        await self._storage.set_client_info(client_info)


def _tokens(tokens: Any, found: Found) -> None:
    if tokens is not None:
        found([getattr(tokens, "access_token", None), getattr(tokens, "refresh_token", None)])
