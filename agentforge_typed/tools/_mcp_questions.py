"""Questions an MCP server asks the user during a call (`elicitation/create`), as pauses of the run.

A call that may pause (under a `ToolService` run) is sent from a task of its own on the session's
loop, apart from the run: when its server asks a question, the run gets a pending result carrying
the question and pauses, while the request stays open on the server, waiting. The run resumes
with an `ElicitationAnswer` for the call (after a JSON round trip of its history if need be, in the
same process): the answer goes to the waiting request and the run takes the call's result, or its
next question. Everything waits within bounds: a question unanswered for `elicitation_timeout`
seconds is answered `cancel`; at most `MAX_OPEN` calls of a server wait; a requested schema over
`MAX_SCHEMA_CHARS` characters, a URL-mode question, or one that cannot be told apart (two calls in
flight) is declined at once.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pydantic_core

from .._approval import Elicitation, ElicitationAnswer, PendingCall, PendingResult
from .._messages import ToolCall
from ._base import ToolExecutionResult
from ._outcomes import execution_error_result
from ._schema_arguments import SchemaArguments
from ._schema_tool import valid_arguments

if TYPE_CHECKING:
    import anyio

__all__ = ["MAX_OPEN", "MAX_SCHEMA_CHARS", "Desk", "OpenCall"]

logger = logging.getLogger("agentforge_typed.mcp")

MAX_SCHEMA_CHARS = 10_000
"""The largest requested schema (as JSON) a question may carry; a larger one is declined."""
MAX_OPEN = 100
"""The most calls of one server that may wait for an answer; past it, a call's questions are
declined."""
_PRIMITIVES = frozenset({"string", "number", "integer", "boolean"})


@dataclass
class OpenCall:
    """A call sent apart from the run, that may stop at a question."""

    changed: anyio.Event
    """Set when `question` or `outcome` is set (replaced by whoever waits on it)."""
    answered: anyio.Event
    session: Any = None
    """The session the request went to (a question comes from it)."""
    scope: anyio.CancelScope | None = None
    """The request's timeout, set aside while a person answers."""
    question: Elicitation | None = None
    validator: SchemaArguments | None = None
    answer: ElicitationAnswer | None = None
    outcome: ToolExecutionResult | None = None


@dataclass
class Desk:
    """The open calls of one server, by the loop's call id, and the questions their server asks.

    Args:
        label: The server's, for warnings.
        timeout: The calls' own timeout (restarted once a question is answered).
        answer_timeout: Seconds a question waits for its answer.
    """

    label: str
    timeout: float
    answer_timeout: float
    calls: dict[str, OpenCall] = field(default_factory=dict)

    def open(self, call_id: str) -> OpenCall | None:
        """A new open call, or `None` when it cannot wait (too many wait, or the id does)."""
        import anyio

        if len(self.calls) >= MAX_OPEN or call_id in self.calls:
            return None
        opened = self.calls[call_id] = OpenCall(anyio.Event(), anyio.Event())
        return opened

    async def next(self, call: ToolCall, opened: OpenCall) -> ToolExecutionResult:
        """The call's result, or a pending result carrying its server's question."""
        import anyio

        while opened.outcome is None and opened.question is None:
            opened.changed = anyio.Event()
            await opened.changed.wait()
        if opened.outcome is not None:
            self.calls.pop(call.id, None)
            return opened.outcome
        assert opened.question is not None
        pending = PendingCall(call, "elicitation", elicitation=opened.question)
        return PendingResult("Awaiting the user's answer.", pending=pending)

    async def resume(
        self, call: ToolCall, tool_name: str, answer: ElicitationAnswer
    ) -> ToolExecutionResult:
        """Give the waiting request its answer; the call's result, or its next question."""
        opened = self.calls.get(call.id)
        if opened is None:
            return execution_error_result(
                tool_name,
                "the server's question is no longer open (its session ended, or the program "
                "restarted); call the tool again",
            )
        if opened.outcome is None and opened.question is not None:
            opened.answer, opened.question = answer, None
            opened.answered.set()
        return await self.next(call, opened)

    def check(self, call: ToolCall, tool_name: str, answer: ElicitationAnswer) -> None:
        """Refuse an answer its question's schema does not accept (`ToolArgumentsError`), or
        content with a refusal (`ValueError`). Without an open question, nothing to check: the
        call then tells the model the question is gone."""
        if answer.action != "accept":
            if answer.content is not None:
                raise ValueError(f"a {answer.action!r} answer carries no content")
            return
        opened = self.calls.get(call.id)
        if opened is None or opened.validator is None:
            return
        content = pydantic_core.to_json(dict(answer.content or {}))
        valid_arguments(tool_name, opened.validator.validate(content))

    def callback(self, session_of: Callable[[], Any]) -> Any:
        """The session's `elicitation_callback` (`session_of()` is the session it serves)."""

        async def elicit(context: Any, params: Any) -> Any:
            from mcp.types import ElicitResult

            opened, reason = self._asking(session_of(), params)
            if opened is None:
                logger.warning("MCP server %s: a question declined: %s", self.label, reason)
                return ElicitResult(action="decline")
            answer = await self._wait(opened)
            if answer is None:
                return ElicitResult(action="cancel")
            accepted = answer.action == "accept"
            content = dict(answer.content or {}) if accepted else None
            return ElicitResult(action=answer.action, content=content)

        return elicit

    def _asking(self, session: Any, params: Any) -> tuple[OpenCall | None, str]:
        """The open call a question belongs to, with its question set; or why it is declined."""
        if getattr(params, "mode", "form") != "form":
            return None, "only form questions are answered (not URL mode)"
        waiting = [c for c in self.calls.values() if c.session is session and c.outcome is None]
        if len(waiting) != 1 or waiting[0].question is not None:
            return None, f"{len(waiting)} calls in flight could have asked it"
        schema = params.requested_schema
        if not isinstance(schema, dict):
            schema = schema.model_dump(mode="json", by_alias=True, exclude_none=True)
        size = len(pydantic_core.to_json(schema))
        if size > MAX_SCHEMA_CHARS:
            return None, f"its schema has {size} characters, over {MAX_SCHEMA_CHARS}"
        properties = schema.get("properties") or {}
        flat = isinstance(properties, dict) and all(
            isinstance(p, dict) and (p.get("type") in _PRIMITIVES or "enum" in p)
            for p in properties.values()
        )
        if schema.get("type") != "object" or not flat:
            return None, "its schema is not an object of primitive properties"
        try:
            validator = SchemaArguments(schema, tool_name="answer", extra_arguments="forbid")
        except ValueError as exc:
            return None, str(exc)
        opened = waiting[0]
        opened.question, opened.validator = Elicitation(str(params.message), schema), validator
        return opened, ""

    async def _wait(self, opened: OpenCall) -> ElicitationAnswer | None:
        """Pause the request's timeout, tell the run, and wait for the answer (bounded)."""
        import anyio

        if opened.scope is not None:
            opened.scope.deadline = math.inf
        opened.answered = anyio.Event()
        opened.changed.set()
        with anyio.move_on_after(self.answer_timeout):
            await opened.answered.wait()
        answer, opened.answer, opened.question = opened.answer, None, None
        if opened.scope is not None:
            opened.scope.deadline = anyio.current_time() + self.timeout
        return answer
