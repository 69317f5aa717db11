"""A worker process for the stores' cross-process tests: it opens the store a URL names and
plays one part, printing one JSON line per step on stdout.

    python store_worker.py race URL ID GO LEDGER HOLD TTL NAME
        Wait for the file GO, claim ID (hold), then, as a run would: record itself in LEDGER
        (the call it runs), keep the claim HOLD seconds (a long tool call), save, release.
        A refused claim prints `conflict` and does nothing else.
    python store_worker.py keep URL ID TTL
        Claim ID, save a history, print `saved`, then keep the claim until killed.
    python store_worker.py churn URL ID TTL
        Claim ID and save ever longer histories (state {"saved": n} beside n messages) until
        killed.

And runs of a `ToolService` over the store (its tools and model below, shared with the tests):

    python store_worker.py resume URL ID DRIVER GO LEDGER CALL HOLD TTL NAME
        Wait for the file GO, then resume the paused conversation ID under DRIVER, approving
        CALL; the approved `refund` takes HOLD seconds. Prints `done` with the answer, or
        `conflict` when the run is refused.
    python store_worker.py start URL ID DRIVER LEDGER PROMPT TTL NAME
        Run PROMPT on the conversation ID under DRIVER; the calls never end (HOLD is infinite):
        the test kills the worker inside one. PROMPT `refund 42`, given with an approval,
        resumes the conversation paused on it (APPROVE=CALL in the environment).

Everything the runs do — each model call, each tool call with its idempotency key — is written
to LEDGER, a line per step, prefixed with NAME.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from loop_drivers import drive

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    FunctionModel,
    ToolCall,
    ToolContext,
    ToolResultMessage,
    ToolService,
    UserMessage,
    tool,
)
from agentforge_typed.stores import (
    ConversationConflictError,
    ConversationStore,
    hold,
    store_from_url,
)


def say(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


def history(n: int) -> list[ChatMessage]:
    """`n` messages: a user's question, then calls and their results."""
    messages: list[ChatMessage] = [UserMessage(content="refund order 42")]
    while len(messages) < n:
        i = len(messages)
        if i % 2:
            call = ToolCall(id=f"call_{i}", name="refund", arguments=json.dumps({"order": i}))
            messages.append(AiMessage(tool_calls=[call]))
        else:
            messages.append(
                ToolResultMessage(tool_call_id=f"call_{i - 1}", tool_name="refund", text="ok")
            )
    return messages


def race(
    url: str, conversation_id: str, go: str, ledger: str, hold_for: str, ttl: str, name: str
) -> None:
    store = store_from_url(url)
    store.load(conversation_id)  # connections opened and the schema ready before the start
    say(step="ready")
    while not Path(go).exists():
        time.sleep(0.001)
    started = time.monotonic()
    try:
        lease = hold(store, conversation_id, ttl=float(ttl))
    except ConversationConflictError:
        say(step="conflict", seconds=time.monotonic() - started)
        return
    with lease:
        say(step="claimed", seconds=time.monotonic() - started)
        lease.check()
        with open(ledger, "a", encoding="utf-8") as file:
            file.write(f"{name}\n")
        time.sleep(float(hold_for))  # the approved call, longer than the claim's ttl
        lease.check()
        messages = [*lease.conversation.messages, UserMessage(content=f"done by {name}")]
        claim = lease.save(messages)
        say(step="saved", version=claim.version)


def keep(url: str, conversation_id: str, ttl: str) -> None:
    store = store_from_url(url)
    lease = hold(store, conversation_id, ttl=float(ttl))
    claim = lease.save(history(5), {"step": "paused"})
    say(step="saved", version=claim.version)
    while True:
        time.sleep(60)


def churn(url: str, conversation_id: str, ttl: str) -> None:
    store = store_from_url(url)
    lease = hold(store, conversation_id, ttl=float(ttl))
    n = 1
    while True:
        lease.save(history(n), {"saved": n})
        if n % 50 == 0:
            say(step="saved", n=n)
        n += 1


# -- runs of a ToolService over the store ----------------------------------------------------------

LEDGER: Path | None = None
"""Where this process writes what its runs do (`None`: nowhere)."""
NAME = "test"
HOLD = 0.0
"""Seconds each `refund`, `charge` and `resend` call takes (`math.inf`: until killed)."""


def ledger(line: str) -> None:
    if LEDGER is not None:
        with open(LEDGER, "a", encoding="utf-8") as file:
            file.write(f"{NAME} {line}\n")


def _effect(kind: str, order: int, context: ToolContext[None]) -> str:
    ledger(f"{kind} {order} {context.idempotency_key}")
    time.sleep(HOLD if math.isfinite(HOLD) else 3600)
    return f"{kind} {order} done"


@tool(requires_approval=True, sequential=True)
def refund(order: int, context: ToolContext[None]) -> str:
    """Refund an order (a person approves each refund).

    Args:
        order: The order number.
    """
    return _effect("refund", order, context)


@tool(sequential=True)
def charge(order: int, context: ToolContext[None]) -> str:
    """Charge an order.

    Args:
        order: The order number.
    """
    return _effect("charge", order, context)


@tool(sequential=True, retry_safe=True)
def resend(order: int, context: ToolContext[None]) -> str:
    """Send an order's receipt again (the mail service drops a repeated idempotency key).

    Args:
        order: The order number.
    """
    return _effect("resend", order, context)


@tool
def note(text: str) -> str:
    """Note something down.

    Args:
        text: What to note.
    """
    ledger(f"note {text}")
    return f"noted {text}"


def script(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
    """The model: asked `<tool> <order>`, it notes it, then calls the tool; given results, it
    answers with their texts."""
    ledger("model")
    last = messages[-1]
    if isinstance(last, ToolResultMessage):
        results: list[str] = []
        for message in reversed(messages):
            if not isinstance(message, ToolResultMessage):
                break
            results.insert(0, message.text)
        return AiMessage(text=" | ".join(results))
    assert isinstance(last, UserMessage) and isinstance(last.content, str)
    name, order = last.content.split()
    calls = [
        ToolCall(id="call_1", name="note", arguments=json.dumps({"text": f"before {name}"})),
        ToolCall(id="call_2", name=name, arguments=json.dumps({"order": int(order)})),
    ]
    return AiMessage(tool_calls=calls)


MODEL = FunctionModel(script)


def service(store: ConversationStore) -> ToolService[None]:
    """The service every process runs the conversation with, on `store`."""
    return ToolService([refund, charge, resend, note], store=store)


def _configure(ledger_path: str, hold_for: float, name: str) -> None:
    global LEDGER, HOLD, NAME
    LEDGER, HOLD, NAME = Path(ledger_path), hold_for, name


def resume(
    url: str,
    conversation_id: str,
    driver: str,
    go: str,
    ledger_path: str,
    call_id: str,
    hold_for: str,
    ttl: str,
    name: str,
) -> None:
    _configure(ledger_path, float(hold_for), name)
    runs = service(store_from_url(url, claim_ttl=float(ttl)))
    assert runs.store is not None
    runs.store.load(conversation_id)  # connections opened and the schema ready before the start
    say(step="ready")
    while not Path(go).exists():
        time.sleep(0.001)
    started = time.monotonic()
    try:
        approvals = {call_id: True}
        result = drive(
            driver, runs, MODEL, None, conversation_id=conversation_id, approvals=approvals
        )
    except ConversationConflictError:
        say(step="conflict", seconds=time.monotonic() - started)
        return
    say(step="done", text=result.text)


def start(
    url: str, conversation_id: str, driver: str, ledger_path: str, prompt: str, ttl: str, name: str
) -> None:
    _configure(ledger_path, math.inf, name)
    approve = os.environ.get("APPROVE")
    options: dict[str, Any] = {"conversation_id": conversation_id}
    if approve:
        options["approvals"] = {approve: True}
    runs = service(store_from_url(url, claim_ttl=float(ttl)))
    drive(driver, runs, MODEL, None if approve else prompt, **options)


if __name__ == "__main__":
    command, *arguments = sys.argv[1:]
    if command == "race":
        race(*arguments)
    elif command == "keep":
        keep(*arguments)
    elif command == "churn":
        churn(*arguments)
    elif command == "resume":
        resume(*arguments)
    elif command == "start":
        start(*arguments)
    else:
        raise SystemExit(f"unknown command {command!r}")
