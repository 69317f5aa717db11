"""Guardrails: typed checks a run applies at four points — the user's input before the first model
call (`input_guardrail`), each call's validated arguments before its body runs
(`call_guardrail`), each result before the model reads it (`result_guardrail`), and the final
output (`output_guardrail`).

A check is sync or async and returns `None` to allow, `Block(reason)`, or (a result guardrail
only) `Redact(...)` with the text the model reads instead. A check that raises blocks (fails
closed). What a verdict does is decided here (`judge`) and applied by the run (`_run`); the
drivers only await the checks the run hands them. Two ready ones: `redact_secrets` and
`max_cost_per_call`.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, Generic, Literal, TypeVar, overload

from .._messages import ChatMessage, ToolCall, shown_name
from .._records import GuardrailOutcome, ToolExecution, ToolExecutionResult
from ..tools._base import ToolContext, ToolLike
from ..tools._budget import cut_result
from ..tools._invoke import invoke, is_async_callable
from ..tools._outcomes import reraise_uncontained

__all__ = [
    "Block",
    "CallCheck",
    "Guardrail",
    "GuardrailPoint",
    "Guardrails",
    "Redact",
    "RunOutput",
    "Verdict",
    "call_guardrail",
    "input_guardrail",
    "judge",
    "max_cost_per_call",
    "output_guardrail",
    "redact_secrets",
    "result_guardrail",
]

GuardrailPoint = Literal["input", "call", "result", "output"]
"""Where a guardrail checks: the input, a call's arguments, a call's result, the final output."""

_POINTS: tuple[GuardrailPoint, ...] = ("input", "call", "result", "output")


@dataclass(frozen=True, slots=True)
class Block:
    """A guardrail's verdict: stop here, saying why (the model reads it for a call or result;
    the program gets it in `GuardrailError` for the input or output)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Redact:
    """A result guardrail's verdict: the model reads `text` instead of the result's text (the
    result's `value` stays the tool's own, for the program)."""

    text: str
    reason: str = "redacted"


Verdict = Block | Redact | None
"""What a check returns: `None` to allow, `Block`, or `Redact` (results only)."""


@dataclass(frozen=True, slots=True)
class CallCheck:
    """What a call guardrail checks: the call, its validated arguments (the tool's arguments
    model, or a dict for a schema, HTTP or MCP tool), its context and its tool."""

    call: ToolCall
    arguments: Any
    context: ToolContext[Any]
    tool: ToolLike


@dataclass(frozen=True, slots=True)
class RunOutput:
    """What an output guardrail checks: the final answer's text, the run's typed output (when
    it has an `output_type`) and the messages so far."""

    text: str | None
    output: Any
    messages: Sequence[ChatMessage]


SubjectT = TypeVar("SubjectT")


@dataclass(frozen=True, slots=True)
class Guardrail(Generic[SubjectT]):
    """One check at one point of a run; build it with `input_guardrail`, `call_guardrail`,
    `result_guardrail` or `output_guardrail`."""

    name: str
    point: GuardrailPoint
    check: Callable[[SubjectT], Verdict | Awaitable[Verdict]]
    concurrent: bool = False
    """An input guardrail that runs while the first model call is in flight, under `achat`,
    `astream` and durable runs (see `input_guardrail`)."""
    is_async: bool = field(init=False, compare=False)
    """Whether `check` is async (awaited under `achat`/`astream`, run on a loop of its own
    under `chat`/`stream`)."""

    def __post_init__(self) -> None:
        if self.point not in _POINTS:
            raise ValueError(
                f"a guardrail's point is 'input', 'call', 'result' or 'output', not {self.point!r}"
            )
        if self.concurrent and self.point != "input":
            raise ValueError("only an input guardrail may be concurrent")
        if not callable(self.check):
            raise TypeError(
                f"a {self.point} guardrail's check must be callable, not {self.check!r}"
            )
        object.__setattr__(self, "is_async", is_async_callable(self.check))


def _named(check: object, name: str | None) -> str:
    return name or getattr(check, "__name__", None) or type(check).__name__


def _builder(point: GuardrailPoint) -> Any:
    def build(check: Any = None, *, name: str | None = None) -> Any:
        def make(fn: Callable[[Any], Any]) -> Guardrail[Any]:
            return Guardrail(_named(fn, name), point, fn)

        return make if check is None else make(check)

    return build


_call = _builder("call")
_result = _builder("result")
_output = _builder("output")

_Check = Callable[[SubjectT], "Verdict | Awaitable[Verdict]"]


@overload
def input_guardrail(
    check: _Check[Sequence[ChatMessage]], *, name: str | None = None, concurrent: bool = False
) -> Guardrail[Sequence[ChatMessage]]: ...
@overload
def input_guardrail(
    check: None = None, *, name: str | None = None, concurrent: bool = False
) -> Callable[[_Check[Sequence[ChatMessage]]], Guardrail[Sequence[ChatMessage]]]: ...
def input_guardrail(check: Any = None, *, name: str | None = None, concurrent: bool = False) -> Any:
    """A guardrail on the run's messages before its first model call (a decorator, with or
    without `name=`; the function's name by default). `Block` ends the run with
    `GuardrailError` before anything is sent.

    `concurrent=True` declares that the input may reach the model while the check runs (a slow
    check, a moderation service): under `achat`, `astream` and durable runs it runs alongside the
    first model call, whose answer is taken (or streamed) only once the check allows the input;
    a block cancels the call (its answer is never read, its usage not counted) and raises
    `GuardrailError`. Under `chat` and `stream` it runs before the call, like the others."""
    if check is None:
        return lambda fn: input_guardrail(fn, name=name, concurrent=concurrent)
    return Guardrail(_named(check, name), "input", check, concurrent)


@overload
def call_guardrail(
    check: _Check[CallCheck], *, name: str | None = None
) -> Guardrail[CallCheck]: ...
@overload
def call_guardrail(
    check: None = None, *, name: str | None = None
) -> Callable[[_Check[CallCheck]], Guardrail[CallCheck]]: ...
def call_guardrail(check: Any = None, *, name: str | None = None) -> Any:
    """A guardrail on each call's validated arguments (`CallCheck`) before its body runs.
    `Block` refuses the call: the model reads the reason, and the body never runs. A call whose
    arguments are invalid is not checked: it fails validation, and nothing runs."""
    return _call(check, name=name)


@overload
def result_guardrail(
    check: _Check[ToolExecution], *, name: str | None = None
) -> Guardrail[ToolExecution]: ...
@overload
def result_guardrail(
    check: None = None, *, name: str | None = None
) -> Callable[[_Check[ToolExecution]], Guardrail[ToolExecution]]: ...
def result_guardrail(check: Any = None, *, name: str | None = None) -> Any:
    """A guardrail on each call's result before the model reads it. `Block` withholds it (the
    model reads why); `Redact` replaces its text. A result cut to its tool's budget keeps its whole
    text in `result.full_text`: a `Redact` replaces that too, and its text is cut again."""
    return _result(check, name=name)


@overload
def output_guardrail(
    check: _Check[RunOutput], *, name: str | None = None
) -> Guardrail[RunOutput]: ...
@overload
def output_guardrail(
    check: None = None, *, name: str | None = None
) -> Callable[[_Check[RunOutput]], Guardrail[RunOutput]]: ...
def output_guardrail(check: Any = None, *, name: str | None = None) -> Any:
    """A guardrail on the run's final answer (`RunOutput`). `Block` ends the run with
    `GuardrailError` instead of its result."""
    return _output(check, name=name)


class Guardrails:
    """A service's guardrails by point, checked once when the service is built."""

    __slots__ = ("any_async", "call", "input", "output", "result")

    def __init__(self, guardrails: Iterable[Guardrail[Any]]) -> None:
        by_point: dict[str, list[Guardrail[Any]]] = {p: [] for p in _POINTS}
        for guardrail in guardrails:
            if not isinstance(guardrail, Guardrail):
                raise TypeError(
                    f"guardrails take Guardrail objects (input_guardrail, call_guardrail, "
                    f"result_guardrail, output_guardrail), not {type(guardrail).__name__}"
                )
            by_point[guardrail.point].append(guardrail)
        self.input: tuple[Guardrail[Sequence[ChatMessage]], ...] = tuple(by_point["input"])
        self.call: tuple[Guardrail[CallCheck], ...] = tuple(by_point["call"])
        self.result: tuple[Guardrail[ToolExecution], ...] = tuple(by_point["result"])
        self.output: tuple[Guardrail[RunOutput], ...] = tuple(by_point["output"])
        self.any_async = {p: any(g.is_async for g in by_point[p]) for p in _POINTS}


def judge(guardrail: Guardrail[Any], verdict: object, error: BaseException | None) -> Verdict:
    """What `guardrail`'s answer (`verdict`, or the `error` its check raised) does: a check that
    raised or answered anything but a verdict blocks (fails closed); `Redact` anywhere but on a
    result blocks too."""
    if error is not None:
        return Block(f"the guardrail raised {type(error).__name__}")
    if verdict is None or isinstance(verdict, Block):
        return verdict
    if isinstance(verdict, Redact):
        if guardrail.point == "result" and isinstance(verdict.text, str):
            return verdict
        return Block(f"the guardrail answered Redact at the {guardrail.point}, not at a result")
    return Block(
        f"the guardrail answered {type(verdict).__name__}, not None, Block or Redact"
        + (" (an awaitable from a sync function?)" if hasattr(verdict, "__await__") else "")
    )


def refused_call(call: ToolCall, guardrail: str, reason: str) -> ToolExecutionResult:
    """The error result the model reads for a call a guardrail blocked (its body never ran)."""
    return ToolExecutionResult.error(
        f"The call to `{shown_name(call.name)}` was blocked by guardrail {guardrail!r}: {reason}",
        "denied",
    )


def guarded_result(
    execution: ToolExecution,
    guardrail: str,
    verdict: Block | Redact,
    error: BaseException | None = None,
) -> ToolExecution:
    """`execution` with its result as `verdict` leaves it (`error`: what the check raised, kept
    as the result's exception), recording the guardrail's outcome."""
    result = execution.result
    if isinstance(verdict, Redact):
        action: Literal["blocked", "redacted"] = "redacted"
        if result.full_text is None:
            result = replace(result, text=verdict.text)
        elif len(verdict.text) > len(result.text):
            # Cut to the tool's budget: the redacted whole is cut again, and kept in its place.
            result = cut_result(verdict.text, len(result.text), result.value, result.repairs)
        else:
            result = ToolExecutionResult(
                verdict.text, result.value, result.is_error, result.error_kind, result.repairs
            )
    else:
        action = "blocked"
        text = (
            f"The result of `{shown_name(execution.call.name)}` was withheld by guardrail "
            f"{guardrail!r}: {verdict.reason}"
        )
        result = ToolExecutionResult.error(text, "denied", exception=error or result.exception)
    outcome = GuardrailOutcome(guardrail, "result", action, verdict.reason)
    return replace(execution, result=result, guardrails=(*execution.guardrails, outcome))


# -- the ready ones ------------------------------------------------------------------------------

_SECRETS: tuple[tuple[str, str], ...] = (
    (
        "private key",
        r"-----BEGIN[A-Z ]{0,40}PRIVATE KEY-----[\s\S]{0,20000}?-----END[A-Z ]{0,40}PRIVATE KEY-----",
    ),
    ("AWS access key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    ("GitHub token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})"),
    ("Slack token", r"\bxox[abposr]-[A-Za-z0-9-]{10,255}"),
    ("Google API key", r"\bAIza[0-9A-Za-z_-]{35}"),
    ("Stripe key", r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,255}"),
    ("API key", r"\bsk-[A-Za-z0-9_-]{20,255}"),
    ("JWT", r"\beyJ[A-Za-z0-9_-]{8,4096}\.eyJ[A-Za-z0-9_-]{8,4096}\.[A-Za-z0-9_-]{8,4096}"),
    ("bearer token", r"(?i)\bbearer[ \t]+[A-Za-z0-9._~+/-]{20,4096}=*"),
    (
        "secret",
        r"(?i)\b(?:api[_-]?key|secret|token|password|passwd)[\"']?[ \t]*[:=][ \t]*"
        r"(?:\"(?P<quoted>[^\"\n]{4,4096})\"|'(?P<single>[^'\n]{4,4096})'|(?P<bare>[^\s\"',;]{8,4096}))",
    ),
)

_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")


def luhn_valid(digits: str) -> bool:
    """Whether `digits` (digits only) pass the Luhn check that payment card numbers carry."""
    total = 0
    for position, digit in enumerate(reversed(digits)):
        value = ord(digit) - 48
        if position % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def redact_secrets(
    *,
    name: str = "redact_secrets",
    cards: bool = True,
    patterns: Sequence[str | re.Pattern[str]] = (),
    replacement: str = "[REDACTED {kind}]",
) -> Guardrail[ToolExecution]:
    """A result guardrail that redacts secrets from what the model reads: private keys, cloud,
    GitHub, Slack, Stripe and `sk-` API keys, JWTs, bearer tokens, `password=`/`api_key:`
    assignments, and (`cards=True`) numbers of 13 to 19 digits that pass the Luhn check. Add
    your own `patterns` (their whole match is redacted, as kind `"custom"`). The result's `value`
    stays the tool's own, for the program; the model and the history get the redacted text.
    """
    compiled = [(kind, re.compile(pattern)) for kind, pattern in _SECRETS]
    compiled += [("custom", re.compile(p) if isinstance(p, str) else p) for p in patterns]
    # A value an earlier pattern redacted (`"token": "[REDACTED GitHub token]"`) stays as it is.
    markers = {replacement.format(kind=kind) for kind, _ in compiled}

    def redacted(text: str) -> tuple[str, list[str]]:
        found: list[str] = []
        for kind, pattern in compiled:
            shown = replacement.format(kind=kind)
            groups = tuple(pattern.groupindex)

            def swap(
                match: re.Match[str],
                kind: str = kind,
                shown: str = shown,
                groups: tuple[str, ...] = groups,
            ) -> str:
                for group in groups:
                    if match.group(group) in markers:
                        return match.group()
                found.append(kind)
                for group in groups:
                    if match.group(group) is not None:
                        # `password="..."`: only the value goes; the model knows what was there.
                        whole, start = match.group(), match.start()
                        return (
                            whole[: match.start(group) - start]
                            + shown
                            + whole[match.end(group) - start :]
                        )
                return shown

            text = pattern.sub(swap, text)
        if cards:
            card = replacement.format(kind="card number")

            def swap_card(match: re.Match[str]) -> str:
                digits = re.sub(r"[ -]", "", match.group())
                if luhn_valid(digits):
                    found.append("card number")
                    return card
                return match.group()

            text = _CARD.sub(swap_card, text)
        return text, found

    def check(execution: ToolExecution) -> Verdict:
        result = execution.result
        text, found = redacted(result.full_text or result.text)
        if not found:
            return None
        kinds = ", ".join(sorted(set(found)))
        return Redact(text, f"redacted {len(found)} secret(s): {kinds}")

    return Guardrail(name, "result", check)


def max_cost_per_call(
    limit: float,
    cost: str | Callable[[CallCheck], float | Decimal | None],
    *,
    tools: Collection[str] | None = None,
    name: str = "max_cost_per_call",
) -> Guardrail[CallCheck]:
    """A call guardrail that blocks a call costing more than `limit`.

    Args:
        limit: The most one call may cost (in whatever unit `cost` answers).
        cost: The call's cost: the name of its argument that holds it (`"amount"`), or a function
            of the `CallCheck` (`None`: the call has no cost).
        tools: The tools it applies to (all by default). A call of one of these whose cost
            cannot be read (no such argument, or not a finite number of at least 0) is blocked;
            under the default, a tool without that argument is not checked.
        name: The guardrail's name.
    """
    if not isinstance(limit, int | float) or not math.isfinite(limit) or limit < 0:
        raise ValueError(f"max_cost_per_call needs a finite limit of at least 0, not {limit!r}")
    if isinstance(tools, str):
        raise TypeError("tools= takes a collection of tool names, not one string")
    scope = None if tools is None else frozenset(tools)

    def read(check: CallCheck) -> object:
        if callable(cost):
            return cost(check)
        arguments = check.arguments
        if isinstance(arguments, dict):
            return arguments.get(cost)
        return getattr(arguments, cost, None)

    def guard(check: CallCheck) -> Verdict:
        if scope is not None and check.call.name not in scope:
            return None
        value = read(check)
        if value is None and scope is None:
            return None
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float | Decimal)
            or not math.isfinite(value)
            or value < 0
        ):
            return Block(f"its cost could not be read ({type(value).__name__})")
        if value > limit:
            return Block(f"it costs {float(value):g}, over the {limit:g} allowed per call")
        return None

    return Guardrail(name, "call", guard)


GUARDING = ToolExecutionResult("Awaiting the call guardrails.")
"""The placeholder of a call whose guardrails include an async one (`Run.aadmit`)."""


def checked(guardrail: Guardrail[Any], subject: Any) -> tuple[object, BaseException | None]:
    """`guardrail`'s answer on `subject` under a blocking run (an async check on a loop of its
    own), or the exception its check raised."""
    try:
        if guardrail.is_async:
            return invoke(guardrail.check, (subject,), is_async=True), None
        return _not_coroutine(guardrail.check(subject)), None
    except BaseException as exc:
        reraise_uncontained(exc)
        return None, exc


async def achecked(guardrail: Guardrail[Any], subject: Any) -> tuple[object, BaseException | None]:
    """`checked` under an async run: an async check is awaited."""
    try:
        if guardrail.is_async:
            return await guardrail.check(subject), None  # type: ignore[misc]
        return _not_coroutine(guardrail.check(subject)), None
    except BaseException as exc:
        reraise_uncontained(exc)
        return None, exc


def _not_coroutine(value: object) -> object:
    if inspect.iscoroutine(value):
        value.close()  # never awaited: `judge` blocks on it, naming what it is
    return value
