"""The report of an eval: per attempt, per case, per tool and overall; its JSON form (a versioned
schema: `EvalReport.model_json_schema()`), and `compare`, which finds regressions and fixes.

Every model here is plain data (pydantic, frozen), so a report written with `--json` reads back
with `EvalReport.load` exactly as it was.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = [
    "REPORT_FORMAT",
    "REPORT_VERSION",
    "ArgumentCheck",
    "Attempt",
    "AttemptError",
    "CallCheck",
    "CaseChange",
    "CaseReport",
    "CheckOutcome",
    "Comparison",
    "EvalReport",
    "ErrorKind",
    "Latency",
    "OutputCheck",
    "Rate",
    "SentCall",
    "Summary",
    "Tokens",
    "ToolStats",
    "TurnScore",
    "compare",
]

REPORT_FORMAT: Literal["agentforge-typed.eval-report"] = "agentforge-typed.eval-report"
REPORT_VERSION: Literal[1] = 1
"""The version of the JSON report's schema; a change that an older reader would misread bumps it."""


class _Data(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SentCall(_Data):
    """A call the model made in a turn's first answer, as it sent it."""

    id: str
    name: str
    arguments: Any
    """The arguments parsed as JSON, or the raw text when they are not JSON."""
    refused: str | None = None
    """The tool's arguments error when the loop refused the call (its first line), else `None`."""


class ArgumentCheck(_Data):
    """One argument of a call, against what was expected."""

    name: str
    ok: bool
    expected: list[Any] | None
    """The acceptable values; `None` for an argument that was not expected at all."""
    sent: bool
    """Whether the model sent the argument (`got` is its value)."""
    got: Any = None
    why: str | None = None
    """What is wrong, when not `ok`: "missing", "not an expected argument", the mismatch."""


class CallCheck(_Data):
    """One expected call, and the call of the answer it was paired with."""

    name: str
    call: int | None
    """The index of the paired call in the answer's `calls`; `None`: no call of this tool."""
    ok: bool
    why: str | None = None
    arguments: list[ArgumentCheck] = Field(default_factory=list)


class TurnScore(_Data):
    """A turn's first answer: its calls and how they match the expected ones."""

    calls: list[SentCall] = Field(default_factory=list)
    expected: list[CallCheck] | None = None
    """One entry per expected call; `None` when the turn's calls are not scored."""
    unexpected: list[int] = Field(default_factory=list)
    """The indices of calls that no expected call was paired with."""
    tool_selection: bool | None = None
    """The answer called exactly the expected tools (as many times, in order when `ordered`)."""
    passed: bool | None = None
    """The calls match whole (as BFCL's checker says `valid`); `None` when not scored."""


class OutputCheck(_Data):
    """The run's output against `expected_output`."""

    ok: bool
    expected: Any
    got: Any


class CheckOutcome(_Data):
    """What the case's `check` said (or a multi-turn environment's check after a turn)."""

    ok: bool
    message: str | None = None


ErrorKind = Literal["model", "run", "check", "timeout", "internal"]
"""Why an attempt ended in an error: the model or its server failed (`ModelError`: nothing was
measured); the loop ended the run (a round limit, a usage limit, arguments still invalid after
retries, an unknown tool: the model's doing, scored as a failure); the case's `check` raised; the
attempt ran past its timeout; anything else."""


class AttemptError(_Data):
    kind: ErrorKind
    type: str
    message: str

    @property
    def scored(self) -> bool:
        """Whether the attempt still measured the model (the loop's own verdict on it)."""
        return self.kind == "run"


class Tokens(_Data):
    input: int = 0
    output: int = 0
    total: int = 0
    cost: Decimal | None = None
    """Estimated US dollars, when the model's price is known (`TokenUsage.cost`)."""


class Attempt(_Data):
    """One run of a case."""

    passed: bool
    turns: list[TurnScore]
    output: OutputCheck | None = None
    check: CheckOutcome | None = None
    error: AttemptError | None = None
    rounds: int
    """Model calls made, over every turn."""
    latency_ms: float
    tokens: Tokens = Field(default_factory=Tokens)
    text: str | None = None
    """The final answer's text (its first `MAX_TEXT_CHARS` characters)."""

    def problems(self) -> list[str]:
        """What went wrong, one line each (empty when the attempt passed)."""
        found: list[str] = []
        if self.error is not None:
            found.append(f"{self.error.kind} error: {self.error.type}: {self.error.message}")
        for number, turn in enumerate(self.turns):
            where = f"turn {number}: " if len(self.turns) > 1 else ""
            if turn.expected is None:
                continue
            if not turn.expected and turn.calls:
                names = ", ".join(call.name for call in turn.calls)
                found.append(f"{where}expected no call, got {names}")
            found.extend(f"{where}{c.name}: {c.why}" for c in turn.expected if not c.ok)
            if turn.expected:
                found.extend(
                    f"{where}unexpected call of {turn.calls[i].name}" for i in turn.unexpected
                )
        if self.output is not None and not self.output.ok:
            got = json.dumps(self.output.got, ensure_ascii=False, default=str)
            found.append(f"output: got {got[:200]}")
        if self.check is not None and not self.check.ok:
            found.append(f"check: {self.check.message}")
        return found


class CaseReport(_Data):
    """A case and its attempts (`--repeat`)."""

    id: str
    tags: list[str] = Field(default_factory=list)
    irrelevance: bool = False
    """The case expects no call at all."""
    attempts: list[Attempt]

    @property
    def passes(self) -> int:
        return sum(a.passed for a in self.attempts)

    @property
    def passed(self) -> bool:
        """Every attempt passed (pass^k for the case)."""
        return bool(self.attempts) and all(a.passed for a in self.attempts)


class Rate(_Data):
    ok: int
    total: int

    @property
    def rate(self) -> float | None:
        return self.ok / self.total if self.total else None


class Latency(_Data):
    mean: float | None = None
    p50: float | None = None
    p95: float | None = None
    max: float | None = None


class ToolStats(_Data):
    """How the model used one tool, over every scored turn of every attempt."""

    expected: int = 0
    """Calls of it that were expected."""
    selected: int = 0
    """Expected calls that the model made (the tool called where it should be)."""
    correct: int = 0
    """Expected calls that the model made with matching arguments."""
    unexpected: int = 0
    """Calls of it that no expected call accounts for."""

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.expected if self.expected else None


class Summary(_Data):
    cases: int
    attempts: int
    passed: int
    """Attempts that passed."""
    score: float | None
    """`passed / attempts` (the pass rate, BFCL's accuracy); `None` with no attempt."""
    tool_selection: Rate
    """Scored turns that expect calls whose answer called exactly the expected tools."""
    arguments: Rate
    """Arguments of paired calls that matched (each expected or sent argument counts once)."""
    irrelevance: Rate
    """Turns expecting no call whose answer made none."""
    pass_hat_k: dict[str, float] = Field(default_factory=dict)
    """k -> the chance that k attempts of a case all pass (tau-bench's pass^k, estimated from
    each case's passes c of n attempts as C(c, k) / C(n, k), averaged over cases)."""
    errors: int = 0
    unscored: int = 0
    """Attempts that measured nothing (an error other than the loop's own verdict)."""
    rounds: float | None = None
    """Mean model calls per attempt."""
    latency_ms: Latency = Field(default_factory=Latency)
    tokens: Tokens = Field(default_factory=Tokens)


class EvalReport(_Data):
    """A whole eval: what ran, how each case went, and the totals.

    Written by `--json` (`to_json`), read back by `load` (for `--compare`); its JSON Schema is
    `EvalReport.model_json_schema()`, versioned by `version`.
    """

    format: Literal["agentforge-typed.eval-report"] = REPORT_FORMAT
    version: Literal[1] = REPORT_VERSION
    created_at: datetime
    model: str
    dialect: str | None = None
    repeat: int = 1
    interrupted: bool = False
    """The run was stopped (Ctrl-C) before every case finished: `unfinished` lists the rest."""
    unfinished: list[str] = Field(default_factory=list)
    summary: Summary
    tools: dict[str, ToolStats] = Field(default_factory=dict)
    cases: list[CaseReport]

    @classmethod
    def build(
        cls,
        cases: Sequence[CaseReport],
        *,
        model: str,
        dialect: str | None = None,
        repeat: int = 1,
        unfinished: Sequence[str] = (),
        interrupted: bool = False,
    ) -> EvalReport:
        """Total up case reports."""
        return cls(
            created_at=datetime.now(timezone.utc),
            model=model,
            dialect=dialect,
            repeat=repeat,
            interrupted=interrupted,
            unfinished=list(unfinished),
            summary=_summary(cases, repeat),
            tools=_tools(cases),
            cases=list(cases),
        )

    def to_json(self) -> str:
        """The report as indented JSON."""
        return self.model_dump_json(indent=2)

    @classmethod
    def load(cls, path: str | Path) -> EvalReport:
        """Read a report `to_json` wrote.

        Raises:
            ValueError: The file cannot be read, is not a report, or has another version.
        """
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"{path}: cannot be read: {exc}") from None
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(step) for step in first["loc"])
            if first["loc"][:1] in (("format",), ("version",)):
                raise ValueError(
                    f"{path}: not an eval report of version {REPORT_VERSION} "
                    f"({where}: {first['msg']})"
                ) from None
            raise ValueError(f"{path}: not an eval report: {where}: {first['msg']}") from None

    @property
    def passed(self) -> bool:
        """Every attempt of every case passed, and none was left unfinished."""
        return not self.unfinished and all(case.passed for case in self.cases)


def _summary(cases: Sequence[CaseReport], repeat: int) -> Summary:
    attempts = [a for case in cases for a in case.attempts]
    passed = sum(a.passed for a in attempts)
    selection = [0, 0]
    arguments = [0, 0]
    irrelevance = [0, 0]
    for attempt in attempts:
        for turn in attempt.turns:
            if turn.expected is None:
                continue
            if not turn.expected:
                irrelevance[0] += not turn.calls
                irrelevance[1] += 1
                continue
            selection[0] += bool(turn.tool_selection)
            selection[1] += 1
            for check in turn.expected:
                if check.call is not None:
                    arguments[0] += sum(a.ok for a in check.arguments)
                    arguments[1] += len(check.arguments)
    latencies = sorted(a.latency_ms for a in attempts)
    return Summary(
        cases=len(cases),
        attempts=len(attempts),
        passed=passed,
        score=passed / len(attempts) if attempts else None,
        tool_selection=Rate(ok=selection[0], total=selection[1]),
        arguments=Rate(ok=arguments[0], total=arguments[1]),
        irrelevance=Rate(ok=irrelevance[0], total=irrelevance[1]),
        pass_hat_k=_pass_hat_k(cases, repeat),
        errors=sum(a.error is not None for a in attempts),
        unscored=sum(a.error is not None and not a.error.scored for a in attempts),
        rounds=statistics.fmean(a.rounds for a in attempts) if attempts else None,
        latency_ms=_latency(latencies),
        tokens=_tokens(a.tokens for a in attempts),
    )


def _pass_hat_k(cases: Sequence[CaseReport], repeat: int) -> dict[str, float]:
    measured = [case for case in cases if case.attempts]
    result: dict[str, float] = {}
    for k in range(1, repeat + 1):
        chances = [
            math.comb(case.passes, k) / math.comb(len(case.attempts), k)
            for case in measured
            if len(case.attempts) >= k
        ]
        if chances:
            result[str(k)] = statistics.fmean(chances)
    return result


def _latency(ordered: Sequence[float]) -> Latency:
    if not ordered:
        return Latency()

    def at(share: float) -> float:
        return ordered[min(len(ordered) - 1, math.ceil(share * len(ordered)) - 1)]

    return Latency(mean=statistics.fmean(ordered), p50=at(0.5), p95=at(0.95), max=ordered[-1])


def _tokens(each: Iterable[Tokens]) -> Tokens:
    input_ = output = total = 0
    cost: Decimal | None = Decimal(0)
    for tokens in each:
        input_ += tokens.input
        output += tokens.output
        total += tokens.total
        if tokens.cost is None:
            if tokens.total or tokens.input or tokens.output:
                cost = None  # a part of unknown price: the sum is unknown
        elif cost is not None:
            cost += tokens.cost
    return Tokens(input=input_, output=output, total=total, cost=cost if total else None)


def _tools(cases: Sequence[CaseReport]) -> dict[str, ToolStats]:
    counts: dict[str, list[int]] = {}
    for case in cases:
        for attempt in case.attempts:
            for turn in attempt.turns:
                if turn.expected is None:
                    continue
                for check in turn.expected:
                    row = counts.setdefault(check.name, [0, 0, 0, 0])
                    row[0] += 1
                    row[1] += check.call is not None
                    row[2] += check.ok
                for index in turn.unexpected:
                    name = turn.calls[index].name
                    counts.setdefault(name, [0, 0, 0, 0])[3] += 1
    return {
        name: ToolStats(expected=row[0], selected=row[1], correct=row[2], unexpected=row[3])
        for name, row in sorted(counts.items())
    }


# -- comparing two runs ---------------------------------------------------------------------------

Change = Literal["regression", "fix", "same", "new", "removed"]


class CaseChange(_Data):
    """One case across two runs: passed before, passed now (`None`: not in that run)."""

    id: str
    change: Change
    before: bool | None
    after: bool | None
    before_passes: str | None = None
    """`"passes/attempts"` in the earlier run."""
    after_passes: str | None = None


class Comparison(_Data):
    """Two runs case by case: a regression passed before and fails now, a fix the reverse."""

    before_score: float | None
    after_score: float | None
    changes: list[CaseChange]

    @property
    def regressions(self) -> list[CaseChange]:
        return [c for c in self.changes if c.change == "regression"]

    @property
    def fixes(self) -> list[CaseChange]:
        return [c for c in self.changes if c.change == "fix"]


def compare(before: EvalReport, after: EvalReport) -> Comparison:
    """Each case of either run, and how it changed: a case passes when every attempt of it
    passed; one not finished in `after` (an interrupted run) is left out."""
    earlier = {case.id: case for case in before.cases}
    later = {case.id: case for case in after.cases}
    changes: list[CaseChange] = []
    for case_id in [*later, *(i for i in earlier if i not in later)]:
        old, new = earlier.get(case_id), later.get(case_id)
        if new is None and case_id in after.unfinished:
            continue
        change: Change
        if old is None:
            change = "new"
        elif new is None:
            change = "removed"
        elif old.passed and not new.passed:
            change = "regression"
        elif new.passed and not old.passed:
            change = "fix"
        else:
            change = "same"
        changes.append(
            CaseChange(
                id=case_id,
                change=change,
                before=None if old is None else old.passed,
                after=None if new is None else new.passed,
                before_passes=None if old is None else f"{old.passes}/{len(old.attempts)}",
                after_passes=None if new is None else f"{new.passes}/{len(new.attempts)}",
            )
        )
    return Comparison(
        before_score=before.summary.score, after_score=after.summary.score, changes=changes
    )
