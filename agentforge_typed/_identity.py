"""Call identity: what identifies a tool call within a conversation.

A call id is a string the server chose, and servers repeat them: some compatible servers number
every answer's calls from `call_0`, and a proxy or a hostile server can send one id twice in an
answer or reuse an id of an earlier round. The loop keys every decision on a call's id — its
approval, its external result, its `ToolContext.idempotency_key`, its place in `pending` — so an
id must name one call. `CallIds.admit` makes it so where an answer enters the loop: a call whose id
is missing or already taken in the conversation gets a new one (`<id>~<n>`), and the message
records the id the server sent (`SERVER_CALL_IDS`), so the history shows both. A provider gets
back the ids it sent (`with_server_ids`, applied by the HTTP shell before the wire).

A run's own id, its conversation id, is random (`random_id`): tools derive idempotency keys from
it, so another run, in this process or any other, must neither share it nor guess it.

A call the run pauses on is recorded on its message with what it waits for and a digest of what
was shown (`PAUSED_CALLS`, `CallDigests`): a decision must match both before the call runs.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import pydantic_core

from ._messages import AiMessage, ChatMessage, ToolCall, ToolResultMessage

if TYPE_CHECKING:
    import hmac

__all__ = [
    "CONVERSATION_ID",
    "MIN_DIGEST_SECRET_BYTES",
    "PAUSED_CALLS",
    "SERVER_CALL_IDS",
    "CallDigests",
    "CallIds",
    "random_id",
    "recorded_conversation",
    "with_server_ids",
]

SERVER_CALL_IDS = "server_call_ids"
"""`AiMessage.attributes` key: the id the server sent for each call the loop gave a new id, by
the new id."""

CONVERSATION_ID = "conversation_id"
"""`AiMessage.attributes` key: the conversation id of the run that paused on the message's calls.
A run resuming them without `conversation_id=` takes it, so the calls keep their owner (the
idempotency keys, questions and decisions keyed on the conversation); one given another id
refuses to resume them."""

PAUSED_CALLS = "paused_calls"
"""`AiMessage.attributes` key: what each call the run paused on waits for, by call id —
`{"reason": ..., "digest": ..., "question": ...}` (`loop/_approval.PausedCall`). Written when the run
pauses, removed once none of the message's calls waits."""

MIN_DIGEST_SECRET_BYTES = 16
"""The shortest `digest_secret` a service takes: the digests and what they cover are in the
history, so a short secret could be found by trying them all."""


_IDS_PER_READ = 64
_unused_ids: list[str] = []
"""Random ids read but not handed out yet (`random_id`)."""


def random_id() -> str:
    """A new random id: 128 bits from the operating system's CSPRNG, as 32 hex digits.

    The bits are read for 64 ids at a time: a system call per id cost a short run more than the
    rest of its set-up. Each id is handed out once (`list.pop` is atomic, so threads never share
    one), and a forked child drops the ids it inherited, so it never repeats its parent's.
    """
    try:
        return _unused_ids.pop()
    except IndexError:
        digits = os.urandom(16 * _IDS_PER_READ).hex()
        _unused_ids.extend(digits[i : i + 32] for i in range(32, len(digits), 32))
        return digits[:32]


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_unused_ids.clear)


def recorded_conversation(message: AiMessage | None) -> str | None:
    """The conversation id recorded on a paused message (`CONVERSATION_ID`), if any."""
    if message is None:
        return None
    recorded = message.attributes.get(CONVERSATION_ID)
    return recorded if isinstance(recorded, str) and recorded else None


class CallIds:
    """The call ids taken in one conversation, to keep every admitted call's id unique in it."""

    __slots__ = ("_next", "_taken")

    def __init__(self, messages: Iterable[ChatMessage]) -> None:
        taken: set[str] = set()
        for message in messages:
            if message.role == "assistant":
                taken.update(call.id for call in message.tool_calls)
            elif message.role == "tool":
                taken.add(message.tool_call_id)
        self._taken = taken
        self._next: dict[str, int] | None = None
        """The next suffix to try for each base id: a server repeating one id n times costs n
        steps in all, not n²."""

    def admit(self, message: AiMessage) -> AiMessage:
        """`message`, its calls' ids made unique in the conversation (and taken); the same object
        when every id already was."""
        # The common case, on every round of every run: ids that are new. Kept lean.
        taken = self._taken
        position = 0
        for call in message.tool_calls:
            call_id = call.id
            if not call_id or call_id in taken:
                return self._renamed(message, position)
            taken.add(call_id)
            position += 1
        return message

    def admit_id(self, call_id: str) -> str:
        """The id `admit` gives a call the server named `call_id` (and takes it)."""
        if call_id and call_id not in self._taken:
            self._taken.add(call_id)
            return call_id
        return self._fresh(call_id or "call")

    def _renamed(self, message: AiMessage, start: int) -> AiMessage:
        """`message` with new ids for its calls from `start` on that need one (those before it
        are taken already)."""
        taken = self._taken
        renamed: dict[str, str] = {}
        calls = list(message.tool_calls[:start])
        for call in message.tool_calls[start:]:
            if call.id and call.id not in taken:
                taken.add(call.id)
                calls.append(call)
                continue
            new_id = self._fresh(call.id or "call")
            renamed[new_id] = call.id
            calls.append(call.model_copy(update={"id": new_id}))
        earlier = message.attributes.get(SERVER_CALL_IDS)
        if isinstance(earlier, dict):
            # Admitted before (a history passed back in): the server's ids stay the first ones.
            renamed = {new: earlier.get(old, old) for new, old in renamed.items()}
        attributes = {**message.attributes, SERVER_CALL_IDS: renamed}
        return message.model_copy(update={"tool_calls": tuple(calls), "attributes": attributes})

    def _fresh(self, base: str) -> str:
        if self._next is None:
            self._next = {}
        n = self._next.get(base, 1)
        while f"{base}~{n}" in self._taken:
            n += 1
        self._next[base] = n + 1
        new_id = f"{base}~{n}"
        self._taken.add(new_id)
        return new_id


def with_server_ids(messages: Sequence[ChatMessage]) -> Sequence[ChatMessage]:
    """`messages` as the server sent its side of them: each call the loop gave a new id, and the
    result paired with it, carry the server's id again. `messages` itself when none was renamed."""
    server: dict[str, str] = {}
    for message in messages:
        if message.role == "assistant" and message.attributes:
            recorded = message.attributes.get(SERVER_CALL_IDS)
            if isinstance(recorded, dict):
                server.update(recorded)
    if not server:
        return messages
    restored: list[ChatMessage] = []
    for message in messages:
        if isinstance(message, AiMessage) and SERVER_CALL_IDS in message.attributes:
            calls = tuple(
                call.model_copy(update={"id": server[call.id]}) if call.id in server else call
                for call in message.tool_calls
            )
            attributes = {k: v for k, v in message.attributes.items() if k != SERVER_CALL_IDS}
            message = message.model_copy(update={"tool_calls": calls, "attributes": attributes})
        elif isinstance(message, ToolResultMessage) and message.tool_call_id in server:
            message = message.model_copy(update={"tool_call_id": server[message.tool_call_id]})
        restored.append(message)
    return restored


class CallDigests:
    """The digests of the calls a service pauses on: what the history records and a decision may
    carry, so that a call changed since it was shown is refused.

    A digest covers why the call waits, the conversation, the call's id, tool and arguments, and
    the question it asks (if any). Plain SHA-256 (`sha256:<hex>`) catches a history changed by
    mistake, or a decision made for another call; keyed with the service's secret, HMAC-SHA-256
    (`hmac-sha256:<hex>`) also catches a history changed on purpose, by whoever keeps it. The
    secret is held only inside an HMAC object, never in an attribute, a `repr` or a record.
    """

    __slots__ = ("_mac",)

    def __init__(self, secret: str | bytes | None = None) -> None:
        self._mac: hmac.HMAC | None = None
        if secret is None:
            return
        if not isinstance(secret, str | bytes):
            raise TypeError(f"digest_secret must be str or bytes, not {type(secret).__name__}")
        key = secret.encode() if isinstance(secret, str) else secret
        if len(key) < MIN_DIGEST_SECRET_BYTES:
            raise ValueError(
                f"digest_secret must be at least {MIN_DIGEST_SECRET_BYTES} bytes (use 32 random "
                "bytes: secrets.token_bytes(32))"
            )
        import hmac  # only a keyed service needs it

        self._mac = hmac.new(key, digestmod=hashlib.sha256)

    def __repr__(self) -> str:
        return f"CallDigests(keyed={self.keyed})"

    @property
    def keyed(self) -> bool:
        """Whether the digests are keyed with a secret (HMAC)."""
        return self._mac is not None

    def of(self, reason: str, conversation_id: str, call: ToolCall, question: Any = None) -> str:
        """The digest of `call`, paused for `reason` in the conversation `conversation_id`
        (`question`: the question it waits on, a dataclass or its JSON form)."""
        covered = pydantic_core.to_json(
            ["agentforge-call/1", reason, conversation_id, call.id, call.name, call.arguments]
            + ([] if question is None else [_question_form(question)])
        )
        if self._mac is None:
            return "sha256:" + hashlib.sha256(covered).hexdigest()
        mac = self._mac.copy()
        mac.update(covered)
        return "hmac-sha256:" + mac.hexdigest()

    @staticmethod
    def same(one: str, other: str) -> bool:
        """Whether two digests are equal (in constant time)."""
        import hmac

        return hmac.compare_digest(one.encode(), other.encode())


_LATER_QUESTION_FIELDS = ("url", "elicitation_id")
"""Fields a question gained after digests were first kept: covered only when set, so that a
pause recorded before them still resumes."""


def _question_form(question: Any) -> Any:
    form = pydantic_core.to_jsonable_python(question)
    if isinstance(form, dict) and any(form.get(name, 0) is None for name in _LATER_QUESTION_FIELDS):
        form = {k: v for k, v in form.items() if not (k in _LATER_QUESTION_FIELDS and v is None)}
    return form
