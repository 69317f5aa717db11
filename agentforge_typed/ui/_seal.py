"""The server's seal on what it hands a browser: the model's side of a conversation, signed.

Without a store, the client holds the conversation and sends it back with every request. What
the *user* wrote is the user's to send; what the *model* and the *tools* said is not: a forged
tool result, an assistant message that never happened or a paused call the model never made
would reach the model as its own. So every assistant and tool message the server streams carries
a seal (AG-UI: the message's `encryptedValue`; the AI SDK: the assistant message's
`metadata.agentforge`): the exact `ChatMessage`s it stands for, with an HMAC-SHA-256 over them
and the thread they belong to. A later request rebuilds the model's side from the seals alone; a
message without one, one made for another thread, or one changed by a single byte is refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from .._content import TextContent
from .._identity import PAUSED_CALLS
from .._messages import AiMessage, ChatMessage, ToolResultMessage, history_adapter
from .._transport._redaction import NO_SECRETS, Redactor
from ._errors import InputError

if TYPE_CHECKING:
    pass

__all__ = ["MIN_SECRET_BYTES", "Sealer"]

MIN_SECRET_BYTES = 16
"""The shortest `secret` the app takes."""

_PREFIX = "af1."
_PURPOSE = b"agentforge-ui-seal/1\x00"
_MAC_CHARS = 43  # 32 bytes, base64url without padding


class Sealer:
    """Seals messages for one server: the key lives only inside an HMAC object.

    Args:
        secret: The key (at least 16 bytes); `None`: a random one, good for this process only
            (conversations held by browsers are refused after a restart).
    """

    __slots__ = ("_mac",)

    def __init__(self, secret: str | bytes | None = None) -> None:
        key = os.urandom(32) if secret is None else secret
        if isinstance(key, str):
            key = key.encode()
        if len(key) < MIN_SECRET_BYTES:
            raise ValueError(f"secret must be at least {MIN_SECRET_BYTES} bytes")
        self._mac = hmac.new(key, _PURPOSE, hashlib.sha256)

    def __repr__(self) -> str:
        return "Sealer(<secret>)"

    def _sign(self, thread_id: str, payload: bytes) -> str:
        mac = self._mac.copy()
        mac.update(thread_id.encode("utf-8", "surrogatepass"))
        mac.update(b"\x00")
        mac.update(payload)
        return base64.urlsafe_b64encode(mac.digest()).rstrip(b"=").decode()

    def seal(
        self, thread_id: str, messages: Sequence[ChatMessage], redactor: Redactor = NO_SECRETS
    ) -> str:
        """The token standing for `messages` in the thread `thread_id`, `redactor`'s secrets
        replaced in their texts first (the client holds what the token carries)."""
        if redactor:
            messages = [_redacted(message, redactor) for message in messages]
        payload = history_adapter().dump_json(list(messages))
        return f"{_PREFIX}{self._sign(thread_id, payload)}.{payload.decode()}"

    def open(self, thread_id: str, token: object, what: str) -> list[ChatMessage]:
        """The messages `token` stands for, checked against `thread_id`.

        Raises:
            InputError: Not a token of this server for this thread, or changed (`what` names
                the message that carried it).
        """
        if not isinstance(token, str) or not token.startswith(_PREFIX):
            raise InputError(400, f"{what} carries no seal of this server: {_ONLY_USER}")
        mac, dot, payload = token[len(_PREFIX) :].partition(".")
        if not dot or len(mac) != _MAC_CHARS:
            raise InputError(400, f"{what} carries a malformed seal: {_ONLY_USER}")
        body = payload.encode("utf-8", "surrogatepass")
        if not hmac.compare_digest(mac, self._sign(thread_id, body)):
            raise InputError(
                400,
                f"{what} was not sealed by this server for this thread (changed, made for "
                "another thread, or sealed before the server restarted with another secret)",
            )
        try:
            return history_adapter().validate_json(body)
        except ValidationError:  # sealed by this key, so ours: a newer or older server's shape
            raise InputError(400, f"{what} holds messages this server cannot read") from None


def _redacted(message: ChatMessage, redactor: Redactor) -> ChatMessage:
    """`message` with `redactor`'s secrets replaced in what the model and the tools wrote: its
    text, reasoning and calls' arguments, a result's text and text parts, and the histories of
    paused sub-runs its record carries."""
    # Copied only where a secret was found: most messages hold none.
    update: dict[str, object] = {}
    if isinstance(message, AiMessage):
        calls = tuple(_replaced(call, "arguments", redactor) for call in message.tool_calls)
        if any(new is not old for new, old in zip(calls, message.tool_calls, strict=True)):
            update["tool_calls"] = calls
        for field in ("text", "thinking"):
            value = getattr(message, field)
            if value is not None and (replaced := redactor.replace(value)) != value:
                update[field] = replaced
        paused = message.attributes.get(PAUSED_CALLS)
        if paused is not None and (record := redactor.redact(paused)) != paused:
            # A paused sub-run's history, carried in the record: redacted too. Its digest then
            # no longer matches, and the resume is refused: a key never reaches the client.
            update["attributes"] = {**message.attributes, PAUSED_CALLS: record}
    elif isinstance(message, ToolResultMessage):
        content = tuple(
            _replaced(part, "text", redactor) if isinstance(part, TextContent) else part
            for part in message.content
        )
        if any(new is not old for new, old in zip(content, message.content, strict=True)):
            update["content"] = content
        if (text := redactor.replace(message.text)) != message.text:
            update["text"] = text
    return message.model_copy(update=update) if update else message


def _replaced(model: Any, field: str, redactor: Redactor) -> Any:
    """`model` with `redactor`'s secrets replaced in its `field` (itself when there are none)."""
    value = getattr(model, field)
    replaced = redactor.replace(value)
    return model if replaced == value else model.model_copy(update={field: replaced})


_ONLY_USER = (
    "a client may send the user's messages; the assistant's and the tools' come from the server, "
    "each with the seal it was streamed with"
)
