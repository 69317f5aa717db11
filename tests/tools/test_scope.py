"""The registry of what outlives a call (`_scope`): kept per conversation, held by the run that
put it (dropped when the run ends without keeping it), each entry with a TTL, each conversation
with at most `MAX_ENTRIES`, at most `MAX_CONVERSATIONS` conversations; a run that keeps nothing
creates nothing; a drop may use the registry (it is called outside the lock)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from agentforge_typed import (
    AiMessage,
    FunctionModel,
    ToolCall,
    ToolContext,
    ToolResultMessage,
    ToolService,
    tool,
)
from agentforge_typed.tools._scope import _REGISTRY, MAX_CONVERSATIONS, MAX_ENTRIES, Scope


@pytest.fixture(autouse=True)
def _forget() -> Iterator[None]:
    yield
    for drop in _REGISTRY.clear():
        drop()


def dropper(log: list[str], name: str) -> Any:
    return lambda: log.append(name)


def test_an_entry_is_its_conversation_s_alone() -> None:
    ada, bob = Scope("ada"), Scope("bob")
    ada.put("key", "Ada's", ttl=60)
    bob.put("key", "Bob's", ttl=60)
    assert (ada.get("key"), bob.get("key")) == ("Ada's", "Bob's")
    assert Scope("ada").get("key") == "Ada's"  # another run of the same conversation
    assert ada.take("key") == "Ada's" and ada.get("key") is None
    assert bob.get("key") == "Bob's"


def test_an_entry_past_its_ttl_is_dropped() -> None:
    dropped: list[str] = []
    scope = Scope("c")
    scope.put("short", 1, ttl=0.05, drop=dropper(dropped, "short"))
    scope.put("long", 2, ttl=60, drop=dropper(dropped, "long"))
    time.sleep(0.1)
    assert scope.get("short") is None and scope.get("long") == 2
    assert dropped == ["short"]
    scope.keep("long", ttl=0.05)  # a new TTL, from now
    time.sleep(0.1)
    assert Scope("c").get("long") is None and dropped == ["short", "long"]
    assert "c" not in _REGISTRY.conversations  # an empty conversation is not kept


def test_a_run_ending_without_its_result_drops_what_it_held() -> None:
    dropped: list[str] = []
    run = Scope("c")
    run.put("open", 1, ttl=60, drop=dropper(dropped, "open"))
    run.put("paused", 2, ttl=60, drop=dropper(dropped, "paused"))
    run.keep("paused", ttl=60)
    run.close(finished=False)
    assert dropped == ["open", "paused"] and Scope("c").get("paused") is None


def test_a_run_ending_with_its_result_leaves_what_it_kept() -> None:
    dropped: list[str] = []
    run = Scope("c")
    run.put("open", 1, ttl=60, drop=dropper(dropped, "open"))
    run.put("paused", 2, ttl=60, drop=dropper(dropped, "paused"))
    run.put("done", 3, ttl=60, drop=dropper(dropped, "done"))
    run.keep("paused", ttl=60)
    assert run.take("done") == 3  # taken: never dropped
    run.close(finished=True)
    run.close(finished=False)  # a second close: nothing left to do
    assert dropped == ["open"]
    # The run that resumes takes it over: ended without its result, it drops it.
    resumed = Scope("c")
    assert resumed.hold("paused", ttl=60) == 2
    resumed.close(finished=False)
    assert dropped == ["open", "paused"]


def test_a_put_after_the_run_ended_is_dropped_at_once() -> None:
    # A call that outlived its cancelled run registers nothing that would outlive it.
    dropped: list[str] = []
    run = Scope("c")
    run.close(finished=False)
    run.put("late", 1, ttl=60, drop=dropper(dropped, "late"))
    assert dropped == ["late"] and run.get("late") is None


def test_a_replaced_entry_is_dropped_and_the_old_run_no_longer_drops_the_new_one() -> None:
    dropped: list[str] = []
    first, second = Scope("c"), Scope("c")
    first.put("k", 1, ttl=60, drop=dropper(dropped, "first"))
    second.put("k", 2, ttl=60, drop=dropper(dropped, "second"))
    assert dropped == ["first"]
    first.close(finished=False)
    assert second.get("k") == 2 and dropped == ["first"]


def test_a_full_conversation_drops_the_entry_due_soonest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_REGISTRY, "max_entries", 3)
    dropped: list[str] = []
    scope = Scope("c")
    for name, ttl in (("b", 20), ("a", 10), ("c", 30)):
        scope.put(name, name, ttl=ttl, drop=dropper(dropped, name))
    scope.put("d", "d", ttl=40, drop=dropper(dropped, "d"))
    assert dropped == ["a"]
    assert [scope.get(k) for k in "abcd"] == [None, "b", "c", "d"]
    assert MAX_ENTRIES == 100


def test_past_max_conversations_the_least_recently_used_is_dropped_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_REGISTRY, "max_conversations", 3)
    dropped: list[str] = []
    for owner in ("one", "two", "three"):
        for key in ("x", "y"):
            Scope(owner).put(key, 1, ttl=60, drop=dropper(dropped, f"{owner}.{key}"))
    assert Scope("one").get("x") == 1  # "one" used: "two" is the least recently used now
    Scope("four").put("x", 1, ttl=60)
    assert dropped == ["two.x", "two.y"]
    assert sorted(_REGISTRY.conversations) == ["four", "one", "three"]
    assert _REGISTRY.size == 5
    assert MAX_CONVERSATIONS == 10_000


def test_refreshing_a_ttl_without_end_keeps_the_schedule_bounded() -> None:
    scope = Scope("c")
    scope.put("k", 1, ttl=60)
    for _ in range(10_000):
        scope.keep("k", ttl=60)
    assert len(_REGISTRY._due) <= 2 * _REGISTRY.size + 64


def test_a_drop_may_use_the_registry() -> None:
    # Drops run outside the registry's lock (cancelling a request may touch its conversation).
    scope = Scope("c")
    scope.put("a", 1, ttl=60, drop=lambda: scope.put("b", 2, ttl=60))
    scope.discard("a")
    assert scope.get("b") == 2


def test_threads_sharing_conversations_keep_the_count_exact() -> None:
    def work(n: int) -> None:
        for i in range(500):
            scope = Scope(f"c{i % 7}")
            scope.put((n, i), i, ttl=60)
            scope.get((n, i - 1))
            if i % 2:
                scope.take((n, i))
            scope.close(finished=i % 3 == 0)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    counted = sum(len(entries) for entries in _REGISTRY.conversations.values())
    assert counted == _REGISTRY.size == 0  # each run held its own: taken or dropped


# -- the loop --------------------------------------------------------------------------------


def calls_then_says(name: str) -> FunctionModel:
    def reply(messages: Any, parameters: Any) -> AiMessage:
        if isinstance(messages[-1], ToolResultMessage):
            return AiMessage(text=messages[-1].text)
        return AiMessage(tool_calls=[ToolCall(id="c1", name=name, arguments="{}")])

    return FunctionModel(reply)


def test_a_run_gives_each_call_its_conversation_s_scope_and_keeps_nothing_itself() -> None:
    seen: list[Any] = []

    @tool
    def look(context: ToolContext) -> str:
        """Look at the context."""
        seen.append(context.scope)
        return "looked"

    result = ToolService([look]).chat(calls_then_says("look"), "go", conversation_id="conv")
    assert result.text == "looked"
    (scope,) = seen
    assert isinstance(scope, Scope) and scope.conversation_id == "conv"
    assert "conv" not in _REGISTRY.conversations  # a run that keeps nothing creates nothing
    assert ToolContext(None, "c1", "look").scope is None  # a direct call has none


def test_what_a_tool_keeps_outlives_its_run_and_what_it_holds_does_not() -> None:
    @tool
    def note(context: ToolContext) -> str:
        """Note the call."""
        scope: Scope = context.scope
        earlier = scope.get("kept")
        scope.put("held", context.tool_call_id, ttl=60)
        scope.put("kept", context.tool_call_id, ttl=60)
        scope.keep("kept", ttl=60)
        return f"earlier: {earlier}"

    service = ToolService([note])
    first = service.chat(calls_then_says("note"), "go", conversation_id="conv")
    assert first.text == "earlier: None"
    assert Scope("conv").get("held") is None and Scope("conv").get("kept") == "c1"
    again = service.chat(calls_then_says("note"), [*first.messages, *first.messages[:1]])
    assert again.conversation_id != "conv" and again.text == "earlier: None"  # another one
    same = service.chat(
        calls_then_says("note"), [*first.messages, *first.messages[:1]], conversation_id="conv"
    )
    assert same.text == "earlier: c1"
