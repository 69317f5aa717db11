"""`agentforge-typed run`: drive the tool loop and show it as it happens, or print it as JSON.

What the model, the tools and the servers wrote is shown through the run's `Redactor` (the keys
of the models it runs with: a server may echo one in a successful answer too) and `printable`
(no control sequence reaches the terminal).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, TextIO

import pydantic_core

from .._messages import shown_name
from .._model import ResponseComplete, TextDelta, ThinkingDelta
from .._records import ToolExecution
from .._response import ChatResponse
from .._transport._redaction import NO_SECRETS, Redactor, StreamRedactor
from ..loop._events import FinalResultEvent, ToolCallEvent, ToolLoopEvent, ToolResultEvent
from ..loop._results import Outcome, ToolChatResult
from ._text import printable, printable_json

__all__ = ["LiveDisplay", "result_json"]


@dataclass
class LiveDisplay:
    """Renders the events of `ToolService.stream` as plain text lines.

    Text and thinking are written as they arrive; tool calls and results each get a line of
    their own (`->` a call with its arguments, `<-` a result, `!!` an error result). Everything
    shown is redacted of `redactor`'s secrets (streamed text held back only as long as a secret
    could be starting) and made `printable`.
    """

    out: TextIO
    redactor: Redactor = NO_SECRETS
    _column: int = 0
    _mode: str = ""
    _held: StreamRedactor | None = None
    _round_text: list[str] = field(default_factory=list)
    _last_round_text: str = ""

    def show(self, events: Iterable[ToolLoopEvent], started: float) -> Outcome[Any]:
        """Write every event; return the run's result (from `FinalResultEvent`)."""
        for event in events:
            if isinstance(event, TextDelta):
                self._stream("", event.text)
                self._round_text.append(event.text)
            elif isinstance(event, ResponseComplete):
                self._flush()
                self._last_round_text = "".join(self._round_text)
                self._round_text.clear()
            elif isinstance(event, ThinkingDelta):
                self._stream("(thinking) ", event.text)
            elif isinstance(event, ToolCallEvent):
                self._line(f"-> {shown_name(event.call.name)} {_arguments(event.call.arguments)}")
            elif isinstance(event, ToolResultEvent):
                self._line(_result_line(event.execution))
            elif isinstance(event, FinalResultEvent):
                self._summary(event.result, time.perf_counter() - started)
                return event.result
        raise RuntimeError("the tool loop ended without a FinalResultEvent")

    def _stream(self, label: str, text: str) -> None:
        if self._mode != label or self._held is None:
            self._flush()
            self._end_line()
            self._mode = label
            self._held = self.redactor.stream()
            self._write(label)
        self._write(printable(self._held.feed(text), lines=True))

    def _flush(self) -> None:
        """Write what a stream still holds back."""
        if self._held is not None:
            self._write(printable(self._held.end(), lines=True))
            self._held = None

    def _line(self, text: str) -> None:
        self._flush()
        self._end_line()
        self._mode = ""
        shown = printable(self.redactor.replace(text), lines=True)
        self._write(shown.replace("\n", "\n   ") + "\n")

    def _end_line(self) -> None:
        if self._column:
            self._write("\n")

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()
        if text:
            newline = text.rfind("\n")
            self._column = len(text) - newline - 1 if newline >= 0 else self._column + len(text)

    def _summary(self, result: ToolChatResult[Any], seconds: float) -> None:
        executions = result.tool_executions
        failed = sum(e.failed for e in executions)
        usage = result.usage
        rounds = len(result.intermediate_responses) + 1
        self._line("")
        if result.pending:
            waiting = ", ".join(f"{p.call.name} ({p.call.id}, {p.reason})" for p in result.pending)
            self._line(f"== paused: {len(result.pending)} call(s) wait for a decision: {waiting}")
        elif result.returned_immediately:
            self._line("== returned immediately with the tool results (no final answer)")
        elif result.text is not None and result.text == self._last_round_text:
            self._line("== final answer: the text streamed above")
        else:
            self._line("== final answer")
            shown = self.redactor.replace(result.text or "(no text)")
            self._write(printable(shown, lines=True) + "\n")
        fallbacks = _fallbacks([*result.intermediate_responses, result.final_response])
        if fallbacks:
            self._line(f"== answered by a fallback model: {', '.join(fallbacks)}")
        self._line(
            f"== {rounds} model call{_s(rounds)}, {len(executions)} tool call{_s(len(executions))}"
            f" ({failed} failed), tokens: {usage.input_tokens} in / {usage.output_tokens} out"
            f" / {usage.total_tokens} total{_cost(usage.cost)}, {seconds:.2f}s"
        )


def _fallbacks(responses: Sequence[ChatResponse]) -> list[str]:
    """The fallback models that answered (`FallbackModel`'s `metadata["fallback"]`), in order."""
    found: list[str] = []
    for response in responses:
        fallback = response.metadata.get("fallback")
        if isinstance(fallback, dict) and fallback.get("index"):
            label = str(fallback.get("model"))
            if label not in found:
                found.append(label)
    return found


def _cost(cost: Decimal | None) -> str:
    # Small runs cost fractions of a cent: six decimals show them.
    return "" if cost is None else f", est. cost ${cost:.6f}"


def _s(count: int) -> str:
    return "" if count == 1 else "s"


def _arguments(raw: str) -> str:
    """The arguments as compact JSON when they parse, else exactly as the model sent them."""
    try:
        return json.dumps(json.loads(raw), ensure_ascii=False)
    except ValueError:
        return raw


def _result_line(execution: ToolExecution) -> str:
    result = execution.result
    took = f"{execution.duration.total_seconds() * 1000:.1f} ms"
    name = shown_name(execution.call.name)
    if result.is_error:
        return f"!! {name} {result.error_kind or 'error'} error ({took}): {result.text}"
    return f"<- {name} ({took}): {result.text}"


def _dump(value: Any) -> Any:
    # A tool's raw `value` may be any object; what JSON cannot hold becomes its repr.
    return pydantic_core.to_jsonable_python(value, fallback=repr)


def result_json(result: ToolChatResult[Any], redactor: Redactor = NO_SECRETS) -> str:
    """The whole `ToolChatResult` as indented JSON (plus each execution's duration), redacted of
    `redactor`'s secrets, its unprintable characters escaped (`printable_json`)."""
    document = {
        "text": result.text,
        "output": _dump(result.output),
        "returned_immediately": result.returned_immediately,
        "pending": [{"call": _dump(p.call), "reason": p.reason} for p in result.pending],
        "usage": _dump(result.usage),
        "final_response": _dump(result.final_response),
        "intermediate_responses": [_dump(r) for r in result.intermediate_responses],
        "tool_executions": [_execution(e) for e in result.tool_executions],
        "messages": [_dump(m) for m in result.messages],
    }
    return printable_json(redactor.redact(document))


def _execution(execution: ToolExecution) -> dict[str, Any]:
    return {
        "call": _dump(execution.call),
        "result": _dump(execution.result),
        "failed": execution.failed,
        "started_at": execution.started_at.isoformat(),
        "finished_at": execution.finished_at.isoformat(),
        "duration_ms": execution.duration.total_seconds() * 1000,
    }
