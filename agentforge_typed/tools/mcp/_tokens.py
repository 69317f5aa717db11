"""Where an `auth=` flow keeps what it obtains (the MCP SDK's `TokenStorage`): `MemoryTokens`, in
this process, and `StoreTokens`, in a conversation store's database under a name of the
program's choosing (one per server and identity), kept across restarts.

Both keep when each token was stored and give it back with the seconds it has left
(`expires_in`), and where the tokens came from (the authorization server's metadata the flow had
discovered), so that a flow loading them (a restarted process) refreshes an expired token at the
right token endpoint (`_auth._Watched`). The SDK is imported when a token is first read
back, never at import.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

__all__ = ["MAX_CREDENTIAL_BYTES", "MemoryTokens", "StoreTokens"]

logger = logging.getLogger("agentforge_typed.mcp")

MAX_CREDENTIAL_BYTES = 64 * 1024
"""The most bytes of JSON `StoreTokens` keeps for one server's tokens, or its registration."""
_MAX_NAME_CHARS = 1024


class MemoryTokens:
    """A `mcp.client.auth.TokenStorage` in this process's memory: give it to one of the MCP SDK's
    OAuth providers (`storage=`). The tokens last as long as the object; `clear()` forgets them.

    Args:
        client_info: A registration the program already holds (a pre-registered client's
            `OAuthClientInformationFull`): the flow then skips dynamic registration.
    """

    def __init__(self, client_info: OAuthClientInformationFull | None = None) -> None:
        self._tokens: tuple[OAuthToken, float] | None = None
        self._client_info = client_info

    def __repr__(self) -> str:
        held = "holding tokens" if self._tokens is not None else "no tokens"
        return f"MemoryTokens({held})"

    async def get_tokens(self) -> OAuthToken | None:
        """The tokens last stored, their `expires_in` the seconds they have left."""
        return None if self._tokens is None else _remaining(*self._tokens)

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self._tokens = (tokens, time.time())

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self._client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._client_info = client_info

    async def clear(self) -> None:
        """Forget the tokens and the registration (the next flow authorizes anew)."""
        self._tokens = self._client_info = self._discovery = None

    # Where the tokens came from, for a flow that loads them (see `_auth._Watched`).

    _discovery: bytes | None = None

    async def _remember_discovery(self, form: bytes | None) -> None:
        self._discovery = form

    async def _recall_discovery(self) -> bytes | None:
        return self._discovery


class StoreTokens:
    """A `mcp.client.auth.TokenStorage` in a conversation store's database (`MemoryStore`,
    `SQLiteStore`, `PostgresStore`): the tokens and the client's registration, under `name`,
    shared by every process that opens the database and kept across restarts.

    Give each server and identity its own name (`"notes:alice"`): two names never see each
    other's tokens. The database holds the tokens as they are (a token cache, like a browser's):
    keep it where you keep secrets (a `SQLiteStore` file is its owner's alone). Tokens and
    registrations over `MAX_CREDENTIAL_BYTES` (64 KiB of JSON) are refused (`ValueError`); a
    stored one that no longer reads is skipped with a warning (the flow then authorizes or
    registers anew and replaces it).

    Args:
        store: The store whose database keeps them (it has `aget_credential`,
            `aput_credential`, `adelete_credential`).
        name: The name they are kept under: a non-empty string of at most 1,024 characters.

    Raises:
        TypeError: A store that cannot keep credentials, or a name that is not a string.
        ValueError: An empty or too long name.
    """

    def __init__(self, store: Any, name: str) -> None:
        missing = [
            method
            for method in ("aget_credential", "aput_credential", "adelete_credential")
            if not callable(getattr(store, method, None))
        ]
        if missing:
            raise TypeError(
                f"StoreTokens needs a store that keeps credentials ({', '.join(missing)}), not "
                f"{type(store).__name__}"
            )
        if not isinstance(name, str):
            raise TypeError(f"a StoreTokens name is a str, not {type(name).__name__}")
        if not name or len(name) > _MAX_NAME_CHARS:
            raise ValueError(
                f"a StoreTokens name is 1 to {_MAX_NAME_CHARS:,} characters, got {len(name):,}"
            )
        self.store = store
        self.name = name
        self._keys = {kind: _key(kind, name) for kind in ("tokens", "client", "discovery")}

    def __repr__(self) -> str:
        return f"StoreTokens({self.store!r}, {self.name!r})"

    async def get_tokens(self) -> OAuthToken | None:
        """The tokens stored under the name, their `expires_in` the seconds they have left."""
        from mcp.shared.auth import OAuthToken

        kept = await self._read("tokens")
        if kept is None:
            return None
        try:
            form = json.loads(kept)
            stored_at = form["stored_at"]
            if (
                isinstance(stored_at, bool)
                or not isinstance(stored_at, int | float)
                or not math.isfinite(stored_at)
            ):
                raise ValueError("stored_at is not a time")
            tokens = OAuthToken.model_validate(form["tokens"])
        except (ValueError, TypeError, KeyError) as error:
            self._unreadable("tokens", error)
            return None
        return _remaining(tokens, float(stored_at))

    async def set_tokens(self, tokens: OAuthToken) -> None:
        form = {
            "tokens": tokens.model_dump(mode="json", exclude_none=True),
            "stored_at": time.time(),
        }
        await self._write("tokens", json.dumps(form, separators=(",", ":")).encode())

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        from mcp.shared.auth import OAuthClientInformationFull

        kept = await self._read("client")
        if kept is None:
            return None
        try:
            return OAuthClientInformationFull.model_validate_json(kept)
        except ValueError as error:
            self._unreadable("registration", error)
            return None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        await self._write("client", client_info.model_dump_json(exclude_none=True).encode())

    async def clear(self) -> None:
        """Forget the tokens and the registration kept under the name (the next flow
        authorizes anew)."""
        for key in self._keys.values():
            await self.store.adelete_credential(key)

    async def _remember_discovery(self, form: bytes | None) -> None:
        """Keep where the tokens came from (`None`, or over the cap: forget it)."""
        if form is None or len(form) > MAX_CREDENTIAL_BYTES:
            await self.store.adelete_credential(self._keys["discovery"])
        else:
            await self.store.aput_credential(self._keys["discovery"], form)

    async def _recall_discovery(self) -> bytes | None:
        return await self._read("discovery")

    async def _read(self, kind: str) -> bytes | None:
        kept: bytes | None = await self.store.aget_credential(self._keys[kind])
        return kept

    async def _write(self, kind: str, value: bytes) -> None:
        if len(value) > MAX_CREDENTIAL_BYTES:
            what = "tokens" if kind == "tokens" else "registration"
            raise ValueError(
                f"the {what} for {self.name!r} are {len(value):,} bytes of JSON, over "
                f"{MAX_CREDENTIAL_BYTES:,}: not kept"
            )
        await self.store.aput_credential(self._keys[kind], value)

    def _unreadable(self, what: str, error: Exception) -> None:
        # The error's kind and where, never its text: a validation error quotes the value.
        logger.warning(
            "the stored %s for %r do not read (%s); ignored: the flow will replace them",
            what,
            self.name,
            _where(error),
        )


def _key(kind: str, name: str) -> str:
    """The key a store keeps one kind of credential of `name` under (a digest: names of any
    content index alike, and two never meet)."""
    return hashlib.sha256(
        f"mcp-oauth\x00{kind}\x00{name}".encode("utf-8", "surrogatepass")
    ).hexdigest()


def _remaining(tokens: OAuthToken, stored_at: float) -> OAuthToken:
    """`tokens` with `expires_in` counted from now (never below 0)."""
    if tokens.expires_in is None:
        return tokens
    left = tokens.expires_in - (time.time() - stored_at)
    return tokens.model_copy(update={"expires_in": max(0, math.floor(left))})


def _where(error: Exception) -> str:
    errors = getattr(error, "errors", None)
    if callable(errors):
        first = errors(include_input=False, include_url=False)[0]
        place = ".".join(str(part) for part in first["loc"]) or "the whole"
        return f"{type(error).__name__} at {place}: {first['msg']}"
    return type(error).__name__
