"""`agentforge-typed conversations`: list, show and delete the conversations of a store.

Everything printed that a conversation holds (its id, its messages) goes out on printable lines:
a stored message cannot forge output lines or reach the terminal as control sequences.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from .._messages import (
    AiMessage,
    ChatMessage,
    CustomMessage,
    ToolResultMessage,
    UserMessage,
    history_adapter,
)
from ..stores import Conversation, ConversationInfo, ConversationPage
from ._text import printable

__all__ = ["conversation_json", "conversation_lines", "page_json", "page_lines", "shown_id"]

TEXT_CHARS = 200
"""The most characters of one message `show` prints without `--json`."""


def shown_id(conversation_id: str) -> str:
    """The id as printed: as it is when it is one printable word, else as a JSON string."""
    if conversation_id.isprintable() and not any(c.isspace() or c == '"' for c in conversation_id):
        return conversation_id
    return json.dumps(conversation_id, ensure_ascii=True)


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat(timespec="seconds")


def _info(info: ConversationInfo) -> dict[str, Any]:
    return {
        "id": info.id,
        "version": info.version,
        "message_count": info.message_count,
        "size": info.size,
        "created_at": _time(info.created_at),
        "updated_at": _time(info.updated_at),
        "claimed_until": _time(info.claimed_until),
    }


def page_json(page: ConversationPage) -> str:
    """A page of a listing as JSON."""
    payload = {
        "conversations": [_info(c) for c in page.conversations],
        "next_cursor": page.next_cursor,
    }
    return json.dumps(payload, indent=2)


def page_lines(page: ConversationPage) -> list[str]:
    """A page of a listing, a line per conversation (newest first)."""
    lines = []
    for info in page.conversations:
        held = f"  claimed until {_time(info.claimed_until)}" if info.claimed_until else ""
        plural = "" if info.message_count == 1 else "s"
        lines.append(
            f"{shown_id(info.id)}  v{info.version}  {info.message_count} message{plural}  "
            f"{info.size:,} bytes  updated {_time(info.updated_at)}{held}"
        )
    if page.next_cursor is not None:
        lines.append(f"(more: --cursor {page.next_cursor})")
    return lines


def conversation_json(conversation: Conversation) -> str:
    """A stored conversation as JSON: its record, the history as the store keeps it."""
    messages = history_adapter().dump_python(list(conversation.messages), mode="json")
    payload = {
        "id": conversation.id,
        "version": conversation.version,
        "created_at": _time(conversation.created_at),
        "updated_at": _time(conversation.updated_at),
        "state": conversation.state,
        "messages": messages,
    }
    return json.dumps(payload, indent=2)


def conversation_lines(conversation: Conversation) -> list[str]:
    """A stored conversation: its record, then a line per message."""
    count = len(conversation.messages)
    lines = [
        f"conversation {shown_id(conversation.id)}, version {conversation.version}, "
        f"{count} message{'' if count == 1 else 's'}",
        f"created {_time(conversation.created_at)}, updated {_time(conversation.updated_at)}",
    ]
    if conversation.state:
        lines.append("state: " + _cut(json.dumps(conversation.state, ensure_ascii=False)))
    lines += [_message_line(message) for message in conversation.messages]
    return lines


def _message_line(message: ChatMessage) -> str:
    if isinstance(message, UserMessage):
        text = message.content if isinstance(message.content, str) else _parts(message.content)
        return f"user: {_cut(text)}"
    if isinstance(message, AiMessage):
        said = [message.text or ""] + [
            f"-> {call.name} {call.arguments}" for call in message.tool_calls
        ]
        return f"assistant: {_cut(' '.join(part for part in said if part))}"
    if isinstance(message, ToolResultMessage):
        mark = "!!" if message.is_error else "<-"
        return f"tool {mark} {_cut(message.tool_name + ': ' + message.text)}"
    if isinstance(message, CustomMessage):
        return f"custom: {_cut(json.dumps(message.attributes, ensure_ascii=False, default=str))}"
    return f"system: {_cut(message.text)}"


def _parts(parts: Any) -> str:
    return " ".join(
        getattr(part, "text", None) or f"[{getattr(part, 'kind', 'part')}]" for part in parts
    )


def _cut(text: str) -> str:
    text = printable(text)
    return text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 1] + "…"
