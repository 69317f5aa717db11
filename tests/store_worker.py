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
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from agentforge_typed import AiMessage, ChatMessage, ToolCall, ToolResultMessage, UserMessage
from agentforge_typed.stores import ConversationConflictError, hold, store_from_url


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


if __name__ == "__main__":
    command, *arguments = sys.argv[1:]
    if command == "race":
        race(*arguments)
    elif command == "keep":
        keep(*arguments)
    elif command == "churn":
        churn(*arguments)
    else:
        raise SystemExit(f"unknown command {command!r}")
