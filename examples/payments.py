"""A payment that waits for a person: the run pauses in one process and resumes in another.

The conversation history is the whole state: `pause` stores it as JSON, `resume` loads it,
adds the person's decision and carries on. Nothing else is kept between the two processes.

    python examples/payments.py pause /tmp/history.json "Pay 250 to bob"
    python examples/payments.py resume /tmp/history.json yes          # or: no, or a reason

The payment carries an idempotency key (`ctx.idempotency_key`), as a payment provider's API takes
one, so that a payment sent twice is made once. The key comes from the conversation id and the
call id, and the paused history records its conversation id: a resume, in any process, takes it
without being told. So a history resumed twice (a retried request, a double click) sends the
same key both times, and the provider charges once: resuming alone cannot tell that the other
resume happened, the key can. The decision checks the call too: it runs only if the history's
call is still the one that paused (its recorded digest).

Offline by default (a small scripted model that reads "Pay N to NAME"); set
`AGENTFORGE_MODEL=openai:gpt-4o-mini` (and `OPENAI_API_KEY`) for a real model.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from agentforge_typed import (
    AiMessage,
    Approval,
    ChatMessage,
    ChatModel,
    ChatRequestParameters,
    FunctionModel,
    ToolCall,
    ToolContext,
    ToolResultMessage,
    ToolService,
    UserMessage,
    get_model,
    pending_calls,
    tool,
)

HISTORY = TypeAdapter(list[ChatMessage])


def over_100(call: ToolCall, context: ToolContext[Any]) -> bool:
    """Only large payments need a person's yes."""
    return bool(json.loads(call.arguments)["amount"] > 100)


@tool(requires_approval=over_100)
def pay(to: str, amount: int, ctx: ToolContext[None]) -> str:
    """Pay an amount (in whole euros) to a person.

    Args:
        to: Who receives the money.
        amount: How many euros.
    """
    # A real program sends the key with the payment (`Idempotency-Key: ...`).
    return f"Paid {amount} EUR to {to} (idempotency key {ctx.idempotency_key})."


service = ToolService([pay])


def scripted(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
    """The offline model: a payment for "Pay N to NAME", then the tool's answer as its own."""
    last = messages[-1]
    if isinstance(last, ToolResultMessage):
        return AiMessage(text=last.text)
    asked = last.content if isinstance(last, UserMessage) else ""
    found = re.search(r"(\d+) to (\w+)", asked if isinstance(asked, str) else "")
    if found is None:
        return AiMessage(text="Say: Pay N to NAME.")
    arguments = json.dumps({"to": found[2], "amount": int(found[1])})
    return AiMessage(tool_calls=[ToolCall(id=f"pay_{found[2]}", name="pay", arguments=arguments)])


def model() -> ChatModel:
    """The model named by `AGENTFORGE_MODEL`, else the offline one."""
    name = os.environ.get("AGENTFORGE_MODEL")
    return get_model(name) if name else FunctionModel(scripted)


def pause(path: Path, prompt: str) -> None:
    """Start a run; store its history, and say which calls wait."""
    result = service.chat(model(), prompt)
    path.write_bytes(HISTORY.dump_json(list(result.messages)))
    for pending in result.pending:
        print(f"pending {pending.call.id} {pending.call.name} {pending.call.arguments}")
    if not result.pending:
        print(result.text)


def resume(path: Path, answer: str) -> None:
    """Resume the stored run with one decision for every pending call. No `conversation_id=`:
    the run takes the one the history recorded when it paused, so the payment's idempotency key
    is the same however often this runs on the same stored history."""
    history = HISTORY.validate_json(path.read_bytes())
    decision: Approval = {"yes": True, "no": False}.get(answer, answer)
    approvals = {call.id: decision for call in pending_calls(history)}
    result = service.chat(model(), history, approvals=approvals)
    path.write_bytes(HISTORY.dump_json(list(result.messages)))
    print(result.text)


if __name__ == "__main__":
    command, file, argument = sys.argv[1:4]
    (pause if command == "pause" else resume)(Path(file), argument)
