"""Running cases through the public loop (`ToolService.achat`) and scoring each attempt.

Everything a case could get wrong about its target (a tool or group it names that the target
lacks, a `check` that does not import, a tool the chosen dialect cannot render) is found before
any model call (`EvalSetupError`). Then attempts run at most `concurrency` at a time; each one's
error is kept in its own report entry, so a model that fails on one case never stops the others.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pydantic_core

from .._exceptions import AgentForgeError, ModelError
from .._messages import AiMessage, ChatMessage, UserMessage
from .._model import ChatModel
from .._records import ToolExecution
from .._request import ChatRequest, ChatRequestParameters, ToolSpecification
from .._response import ChatResponse, TokenUsage
from .._sync import run_sync
from ..loop._results import ToolChatResult
from ..loop._service import ToolService
from ..loop._usage import UsageLimits
from ..providers import DIALECTS, Dialect, SchemaDialectError, render_schema
from ._cases import EvalCase, Turn
from ._match import score_turn
from ._report import (
    Attempt,
    AttemptError,
    CaseReport,
    CheckOutcome,
    ErrorKind,
    EvalReport,
    OutputCheck,
    Tokens,
    TurnScore,
)

__all__ = [
    "MAX_TEXT_CHARS",
    "CaseSetup",
    "EvalSetupError",
    "EvalTarget",
    "arun_eval",
    "case_reports",
    "run_eval",
]

MAX_TEXT_CHARS = 2000
"""Characters of a final answer's text an attempt keeps (and of an error message)."""
_GROUP = "group:"


@dataclass(frozen=True)
class CaseSetup:
    """What one attempt of a case runs against, when the target builds it per case: a fresh
    service (tools holding state of their own), its deps, and a check after each turn."""

    service: ToolService[Any]
    deps: Any = None
    after_turn: Callable[[int, ToolChatResult[Any]], str | None] | None = None
    """Called after each turn that ended without an error, with the turn's index and result;
    returns why the turn failed (the attempt fails, the reason is reported), or `None`."""


EvalTarget = ToolService[Any] | Callable[[EvalCase], "ToolService[Any] | CaseSetup"]
"""What the cases run against: one `ToolService` for every case, or a function building one
(or a `CaseSetup`) for each attempt of a case."""

OnAttempt = Callable[[EvalCase, int, Attempt], None]


class EvalSetupError(ValueError):
    """Cases that cannot run against their target; found before any model call.

    Attributes:
        problems: One line per problem, each naming its case.
    """

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        shown = self.problems[:20]
        more = len(self.problems) - len(shown)
        tail = f"\n... and {more} more" if more else ""
        super().__init__("\n".join(shown) + tail)


def run_eval(
    cases: Sequence[EvalCase],
    target: EvalTarget,
    model: ChatModel,
    *,
    repeat: int = 1,
    concurrency: int = 8,
    dialect: Dialect | None = None,
    deps: Any = None,
    parameters: ChatRequestParameters | None = None,
    output_type: Any = None,
    timeout: float | None = None,
    model_name: str | None = None,
    on_attempt: OnAttempt | None = None,
) -> EvalReport:
    """`arun_eval`, blocking (from a thread where no event loop runs, or one that does)."""
    return run_sync(
        lambda: arun_eval(
            cases,
            target,
            model,
            repeat=repeat,
            concurrency=concurrency,
            dialect=dialect,
            deps=deps,
            parameters=parameters,
            output_type=output_type,
            timeout=timeout,
            model_name=model_name,
            on_attempt=on_attempt,
        )
    )


async def arun_eval(
    cases: Sequence[EvalCase],
    target: EvalTarget,
    model: ChatModel,
    *,
    repeat: int = 1,
    concurrency: int = 8,
    dialect: Dialect | None = None,
    deps: Any = None,
    parameters: ChatRequestParameters | None = None,
    output_type: Any = None,
    timeout: float | None = None,
    model_name: str | None = None,
    on_attempt: OnAttempt | None = None,
) -> EvalReport:
    """Run every case `repeat` times against `target` with `model`, and score each attempt.

    Args:
        cases: The cases (`load_cases`, `load_bfcl`).
        target: A `ToolService`, or a function building one (or a `CaseSetup`) per attempt.
        model: The model every case runs with.
        repeat: Attempts per case (pass^k is reported for k up to it).
        concurrency: The most attempts in flight at once.
        dialect: Render every tool's schema in this dialect before the model sees it (and ask
            for strict enforcement for the `-strict` ones); `None`: as the provider sends them.
        deps: What the tools receive as `ToolContext.deps` (a `CaseSetup`'s own wins).
        parameters: Request parameters for every model call (`temperature`, `max_tokens`...).
        output_type: The run's output type; `expected_output` is compared to its value.
        timeout: The most seconds one attempt may take, every turn included.
        model_name: The model as the report names it (default: the model's own name).
        on_attempt: Called with each finished attempt (`case`, its index, the `Attempt`), in the
            order they finish: a progress display, or what an interrupted run keeps.

    Raises:
        EvalSetupError: A case names a tool, a group or a check its target does not have, or
            the dialect cannot render a tool; no model was called.
        ValueError: `repeat`, `concurrency` or `timeout` out of range, or an unknown dialect.
    """
    if repeat < 1 or concurrency < 1:
        raise ValueError("repeat and concurrency must be at least 1")
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout must be positive, got {timeout!r}")
    if dialect is not None and dialect not in DIALECTS:
        raise ValueError(f"unknown dialect {dialect!r}; expected one of {', '.join(DIALECTS)}")
    plans = _prepare(cases, target, dialect)
    if dialect is not None:
        model = _Rendered(model, dialect)
    settings = _Settings(
        model=model,
        deps=deps,
        parameters=parameters,
        output_type=output_type,
        strict_everywhere=dialect == "openai-strict",
    )
    attempts: dict[str, list[Attempt | None]] = {case.id: [None] * repeat for case in cases}
    work = iter([(plan, index) for plan in plans for index in range(repeat)])

    async def worker() -> None:
        for plan, index in work:
            attempt = await _timed(plan, settings, timeout)
            attempts[plan.case.id][index] = attempt
            if on_attempt is not None:
                on_attempt(plan.case, index, attempt)

    await asyncio.gather(*(worker() for _ in range(min(concurrency, len(plans) * repeat))))
    reports, unfinished = case_reports(cases, attempts)
    return EvalReport.build(
        reports,
        model=model_name or _label(model),
        dialect=dialect,
        repeat=repeat,
        unfinished=unfinished,
    )


def case_reports(
    cases: Sequence[EvalCase], attempts: Mapping[str, Sequence[Attempt | None]]
) -> tuple[list[CaseReport], list[str]]:
    """The cases whose every attempt finished, as reports, and the ids of the others."""
    reports: list[CaseReport] = []
    unfinished: list[str] = []
    for case in cases:
        done = [a for a in attempts.get(case.id, ()) if a is not None]
        if done and len(done) == len(attempts[case.id]):
            reports.append(
                CaseReport(
                    id=case.id,
                    tags=list(case.tags),
                    irrelevance=case.expected_calls == [],
                    attempts=done,
                )
            )
        else:
            unfinished.append(case.id)
    return reports, unfinished


# -- before any model call ----------------------------------------------------------------------


@dataclass
class _Plan:
    case: EvalCase
    build: Callable[[], CaseSetup]
    schemas: dict[str, dict[str, Any]]
    selections: list[list[str] | None]
    """Each turn's tool selection (names and groups), `None`: every tool."""
    check: Callable[..., Any] | None
    nullable: frozenset[str]
    """The tools declared `strict_schema`: a `null` the model sends for one of their optional
    parameters is the parameter left out, as the loop reads it."""


def _prepare(cases: Sequence[EvalCase], target: EvalTarget, dialect: Dialect | None) -> list[_Plan]:
    problems: list[str] = []
    plans: list[_Plan] = []
    rendered: set[int] = set()
    for case in cases:
        try:
            setup = _setup(target, case)
        except Exception as exc:  # the program's own factory
            problems.append(f"case {case.id}: building its target failed: {_line(exc)}")
            continue
        service = setup.service
        names = [spec.name for spec in service.specifications]
        groups = service.groups
        selections: list[list[str] | None] = []
        selection = case.tools
        for number, turn in enumerate(case.all_turns()):
            if turn.tools is not None:
                selection = turn.tools
            selections.append(selection)
            offered = _offered(selection, names, groups, case.id, problems)
            for call in turn.expected_calls or ():
                if call.name not in offered:
                    where = "" if number == 0 else f" (turn {number})"
                    problems.append(
                        f"case {case.id}{where}: expects a call of {call.name!r}, which "
                        f"{'is not offered' if call.name in names else 'is not a tool of the target'}"
                        f"; its tools: {', '.join(offered) or 'none'}"
                    )
        check = None
        if case.check is not None:
            try:
                check = _callable(case.check)
            except ValueError as exc:
                problems.append(f"case {case.id}: check {exc}")
        if dialect is not None and id(service) not in rendered:
            rendered.add(id(service))
            for spec in service.specifications:
                try:
                    render_schema(spec.parameters, dialect)
                except SchemaDialectError as exc:
                    problems.append(f"case {case.id}: the {dialect} dialect cannot render: {exc}")
        schemas = {spec.name: dict(spec.parameters) for spec in service.specifications}
        first = setup

        def build(case: EvalCase = case, first: list[CaseSetup] = [first]) -> CaseSetup:  # noqa: B006
            # The setup built to check the case serves its first attempt.
            return first.pop() if first else _setup(target, case)

        nullable = frozenset(s.name for s in service.specifications if s.strict_schema)
        plans.append(_Plan(case, build, schemas, selections, check, nullable))
    if problems:
        raise EvalSetupError(problems)
    return plans


def _setup(target: EvalTarget, case: EvalCase) -> CaseSetup:
    if isinstance(target, ToolService):
        return CaseSetup(service=target)
    built = target(case)
    if isinstance(built, CaseSetup):
        return built
    if isinstance(built, ToolService):
        return CaseSetup(service=built)
    raise TypeError(f"the target returned {type(built).__name__}, not a ToolService or CaseSetup")


def _offered(
    selection: Sequence[str] | None,
    names: Sequence[str],
    groups: Mapping[str, Sequence[str]],
    case_id: str,
    problems: list[str],
) -> list[str]:
    if selection is None:
        return list(names)
    chosen: set[str] = set()
    for selector in selection:
        if selector.startswith(_GROUP):
            group = selector[len(_GROUP) :]
            if group in groups:
                chosen.update(groups[group])
            else:
                problems.append(
                    f"case {case_id}: tools names the group {group!r}, which the "
                    f"target does not have; its groups: {', '.join(groups) or 'none'}"
                )
        elif selector in names:
            chosen.add(selector)
        else:
            problems.append(
                f"case {case_id}: tools names {selector!r}, which is not a tool of "
                f"the target; its tools: {', '.join(names) or 'none'}"
            )
    return [name for name in names if name in chosen]


def _callable(spec: str) -> Callable[..., Any]:
    module_name, _, attribute = spec.partition(":")
    try:
        value: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            value = getattr(value, part)
    except Exception as exc:  # an import that fails, an attribute that is missing
        raise ValueError(f"{spec!r} cannot be loaded: {_line(exc)}") from None
    if not callable(value):
        raise ValueError(f"{spec!r} is {type(value).__name__}, not a callable")
    return value  # type: ignore[no-any-return]


# -- one attempt ----------------------------------------------------------------------------------


@dataclass
class _Settings:
    model: ChatModel
    deps: Any
    parameters: ChatRequestParameters | None
    output_type: Any
    strict_everywhere: bool
    """Every tool is sent with optional parameters required and nullable (`openai-strict`)."""


@dataclass
class _Progress:
    """What an attempt has done so far: kept when it ends in an error or its timeout."""

    turns: list[TurnScore] = field(default_factory=list)
    usage: TokenUsage = field(default_factory=TokenUsage)
    rounds: int = 0
    text: str | None = None
    output: OutputCheck | None = None
    check: CheckOutcome | None = None


async def _timed(plan: _Plan, settings: _Settings, timeout: float | None) -> Attempt:
    progress = _Progress()
    started = time.perf_counter()
    error: AttemptError | None = None
    try:
        if timeout is None:
            await _attempt(plan, settings, progress)
        else:
            await asyncio.wait_for(_attempt(plan, settings, progress), timeout)
    except asyncio.TimeoutError:
        error = AttemptError(
            kind="timeout", type="TimeoutError", message=f"no result within {timeout:g}s"
        )
    except _CheckError as failed:
        error = _error("check", failed.error)
    except Exception as exc:  # each attempt's error is its own: the others go on
        error = _error(_kind(exc), exc)
    latency = (time.perf_counter() - started) * 1000
    usage = progress.usage
    passed = (
        error is None
        and all(turn.passed is not False for turn in progress.turns)
        and (progress.output is None or progress.output.ok)
        and (progress.check is None or progress.check.ok)
    )
    return Attempt(
        passed=passed,
        turns=progress.turns,
        output=progress.output,
        check=progress.check,
        error=error,
        rounds=progress.rounds,
        latency_ms=latency,
        tokens=Tokens(
            input=usage.input_tokens,
            output=usage.output_tokens,
            total=usage.total_tokens,
            cost=usage.cost,
        ),
        text=progress.text,
    )


class _CheckError(Exception):
    def __init__(self, error: Exception) -> None:
        self.error = error


async def _attempt(plan: _Plan, settings: _Settings, progress: _Progress) -> None:
    case = plan.case
    setup = plan.build()
    deps = setup.deps if setup.deps is not None else settings.deps
    limits = None if case.max_rounds is None else UsageLimits(request_limit=case.max_rounds)
    messages: list[ChatMessage] = []
    result: ToolChatResult[Any] | None = None
    for index, turn in enumerate(case.all_turns()):
        start = len(messages)
        messages.extend(_messages(turn.input))
        try:
            result = await setup.service.achat(
                settings.model,
                messages,
                settings.parameters,
                deps=deps,
                output_type=settings.output_type,
                tools=plan.selections[index],
                usage_limits=limits,
            )
        except Exception as exc:
            history = getattr(exc, "messages", None) or messages
            _score(plan, settings, progress, turn, history, start, _executions(exc))
            usage = getattr(exc, "usage", None)
            if isinstance(usage, TokenUsage):
                progress.usage += usage
            raise
        messages = list(result.messages)
        progress.usage += result.usage
        progress.text = _cut(result.text)
        _score(plan, settings, progress, turn, messages, start, result.tool_executions)
        if setup.after_turn is not None:
            failure = setup.after_turn(index, result)
            if failure is not None and progress.check is None:
                progress.check = CheckOutcome(ok=False, message=f"turn {index}: {failure}")
    assert result is not None  # a case has at least one turn
    if case.expected_output is not None:
        got = (
            pydantic_core.to_jsonable_python(result.output, fallback=repr)
            if settings.output_type is not None
            else result.text
        )
        progress.output = OutputCheck(
            ok=_same_json(got, case.expected_output), expected=case.expected_output, got=got
        )
    if plan.check is not None and progress.check is None:
        progress.check = await _run_check(plan.check, result, case)
    elif progress.check is None and setup.after_turn is not None:
        progress.check = CheckOutcome(ok=True)


def _score(
    plan: _Plan,
    settings: _Settings,
    progress: _Progress,
    turn: Turn,
    history: Sequence[ChatMessage],
    start: int,
    executions: Sequence[ToolExecution],
) -> None:
    answers = [m for m in history[start:] if isinstance(m, AiMessage)]
    progress.rounds += len(answers)
    calls = answers[0].tool_calls if answers else ()
    refused = {
        e.call.id: _cut(" ".join(e.result.text.split())) or ""
        for e in executions
        if e.result.error_kind == "arguments"
    }
    progress.turns.append(
        score_turn(
            turn.expected_calls,
            calls,
            plan.schemas,
            ordered=plan.case.ordered,
            strings=plan.case.strings,
            null_is_omitted=plan.schemas.keys() if settings.strict_everywhere else plan.nullable,
            refused=refused,
        )
    )


async def _run_check(
    check: Callable[..., Any], result: ToolChatResult[Any], case: EvalCase
) -> CheckOutcome:
    try:
        verdict = check(result, case)
        if inspect.isawaitable(verdict):
            verdict = await verdict
    except AssertionError as failed:
        # Its first line: what `assert x, "why"` says (pytest adds the expression's parts after).
        message = str(failed).strip().split("\n", 1)[0]
        return CheckOutcome(ok=False, message=_cut(message) or "assertion failed")
    except Exception as exc:
        raise _CheckError(exc) from exc
    if verdict is False:
        return CheckOutcome(ok=False, message="the check returned False")
    return CheckOutcome(ok=True)


def _messages(value: str | Sequence[ChatMessage]) -> list[ChatMessage]:
    return [UserMessage(content=value)] if isinstance(value, str) else list(value)


def _executions(exc: BaseException) -> Sequence[ToolExecution]:
    executions = getattr(exc, "tool_executions", None)
    return executions if isinstance(executions, (list, tuple)) else ()


def _same_json(got: Any, expected: Any) -> bool:
    """JSON equality: `true` is not `1`, `1` is `1.0`; objects by key, arrays in order."""
    if isinstance(expected, bool) or isinstance(got, bool) or expected is None or got is None:
        return type(got) is type(expected) and got == expected
    if isinstance(expected, (int, float)):
        return isinstance(got, (int, float)) and got == expected
    if isinstance(expected, list):
        return (
            isinstance(got, list)
            and len(got) == len(expected)
            and all(_same_json(g, e) for g, e in zip(got, expected, strict=True))
        )
    if isinstance(expected, dict):
        return (
            isinstance(got, dict)
            and got.keys() == expected.keys()
            and all(_same_json(got[k], expected[k]) for k in expected)
        )
    return bool(got == expected)


def _kind(exc: BaseException) -> ErrorKind:
    if isinstance(exc, ModelError):
        return "model"
    if isinstance(exc, AgentForgeError):
        return "run"
    return "internal"


def _error(kind: ErrorKind, exc: BaseException) -> AttemptError:
    return AttemptError(kind=kind, type=type(exc).__name__, message=_cut(str(exc)) or "")


def _cut(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_TEXT_CHARS:
        return text
    return text[: MAX_TEXT_CHARS - 1] + "…"


def _line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def _label(model: ChatModel) -> str:
    inner = getattr(model, "_model", model)
    for attribute in ("model", "name"):
        value = getattr(inner, attribute, None)
        if isinstance(value, str) and value:
            return value
    return type(inner).__name__


# -- a dialect's rendering ------------------------------------------------------------------------


class _Rendered:
    """A model that is sent every tool's schema rendered in one dialect (and asked to enforce it,
    for the strict ones): the provider's own wire then maps what it is given."""

    def __init__(self, model: ChatModel, dialect: Dialect) -> None:
        self._model = model
        self._dialect = dialect
        self._strict = dialect.endswith("-strict")
        self._cache: dict[int, tuple[ToolSpecification, ToolSpecification]] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def _render(self, request: ChatRequest) -> ChatRequest:
        parameters = request.parameters
        if parameters is None or not parameters.tools:
            return request
        tools = tuple(self._spec(spec) for spec in parameters.tools)
        return request.model_copy(
            update={"parameters": parameters.model_copy(update={"tools": tools})}
        )

    def _spec(self, spec: ToolSpecification) -> ToolSpecification:
        # Keyed by identity, the spec kept beside its rendering so that its id is not reused.
        cached = self._cache.get(id(spec))
        if cached is None:
            rendered = spec.model_copy(
                update={
                    "parameters": render_schema(spec.parameters, self._dialect),
                    "strict_schema": self._strict,
                }
            )
            cached = self._cache[id(spec)] = (spec, rendered)
        return cached[1]

    def chat(self, request: ChatRequest) -> ChatResponse:
        return self._model.chat(self._render(request))

    async def achat(self, request: ChatRequest) -> ChatResponse:
        return await self._model.achat(self._render(request))

    def stream(self, request: ChatRequest) -> Iterator[Any]:
        return self._model.stream(self._render(request))

    def astream(self, request: ChatRequest) -> Any:
        return self._model.astream(self._render(request))
