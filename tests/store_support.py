"""What the store tests share: opening a registered store kind at a fresh place, a history of
every message kind, and raw access to a database behind a store's back (to corrupt it, or to
look at what it wrote)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conformance import STORE, Surface

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    CustomMessage,
    ImageContent,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from agentforge_typed.stores import ConversationStore, store_from_url

__all__ = ["ALL", "HISTORY", "Opener", "history", "opener", "raw"]

ALL = [pytest.param(surface, id=surface.name) for surface in STORE.surfaces.values()]
"""Every registered store kind."""

HISTORY: list[ChatMessage] = [
    SystemMessage(text="You are terse."),
    UserMessage(content="Refund order 42 — “now”, 'please'", name="alice"),
    UserMessage(
        content=[
            TextContent(text="this receipt"),
            ImageContent(data=b"\x89PNG\x00\xff", media_type="image/png"),
        ]
    ),
    AiMessage(
        text="Let me check.",
        thinking="Need the refund tool.",
        tool_calls=[ToolCall(id="call_1", name="refund", arguments='{"order": 42}')],
        attributes={"signature": "abc", "nested": {"n": [1, 2.5, None, True]}},
    ),
    ToolResultMessage(tool_call_id="call_1", tool_name="refund", text="refunded\x00 \U0001f600"),
    ToolResultMessage(tool_call_id="call_2", tool_name="other", text="boom", is_error=True),
    CustomMessage(attributes={"type": "web_search_result", "items": [1, 2]}),
    AiMessage(text="Done."),
]
"""One of each message kind, with binary content, NULs, quotes and non-BMP text."""


def history(n: int, *, text: str = "x" * 40) -> list[ChatMessage]:
    """`n` messages alternating user and assistant."""
    return [
        UserMessage(content=f"{i} {text}") if i % 2 == 0 else AiMessage(text=f"{i} {text}")
        for i in range(n)
    ]


@pytest.fixture
def opener(
    tmp_path: Path, request: pytest.FixtureRequest, surface: Surface[Any]
) -> Iterator[Opener]:
    """Stores of the kind `surface` (the test's parameter) at a new place, closed at the end.
    Bring it into a test module with `opener = store_support.opener`."""
    opened = Opener(surface, surface.build(tmp_path, request))
    try:
        yield opened
    finally:
        for store in opened.opened:
            store.close()


class Opener:
    """Opens stores of one kind at one place (closed at the end of the test)."""

    def __init__(self, surface: Surface[Any], url: str) -> None:
        self.surface = surface
        self.url = url
        self.opened: list[ConversationStore] = []

    def __call__(self, **options: Any) -> ConversationStore:
        store = store_from_url(self.url, **options)
        self.opened.append(store)
        return store

    @property
    def shared(self) -> bool:
        return bool(self.surface["shared"])


@contextlib.contextmanager
def raw(url: str) -> Iterator[Callable[..., list[Any]]]:
    """Run SQL on the database behind a store URL (`?` placeholders), behind the store's back:
    `execute(sql, *parameters)` gives the rows."""
    if url.startswith("sqlite:///"):
        connection = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)

        def execute(sql: str, *parameters: Any) -> list[Any]:
            return connection.execute(sql, parameters).fetchall()

        try:
            yield execute
        finally:
            connection.close()
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as pg:

        def run(sql: str, *parameters: Any) -> list[Any]:
            cursor = pg.execute(sql.replace("?", "%s"), parameters)
            return cursor.fetchall() if cursor.description else []

        yield run
