"""Static-typing contract of the evals: cases, the runner's options, the report and its parts."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from typing_extensions import assert_type

from agentforge_typed import FakeModel, ToolChatResult, ToolService
from agentforge_typed.evals import (
    render_html,
    BfclSuite,
    CaseReport,
    CaseSetup,
    Comparison,
    EvalCase,
    EvalReport,
    EvalSetupError,
    ExpectedCall,
    Tokens,
    ToolStats,
    TurnScore,
    arun_eval,
    cases_from,
    compare,
    load_bfcl,
    load_cases,
    run_eval,
)

cases = load_cases("cases.jsonl")
assert_type(cases, list[EvalCase])
assert_type(cases_from([(1, {"id": "a", "input": "hi"})]), list[EvalCase])
case = EvalCase(
    id="a", input="hi", expected_calls=[ExpectedCall(name="f", arguments={"x": [1, ""]})]
)
assert_type(case.expected_calls, list[ExpectedCall] | None)

service = ToolService()
report = run_eval(
    cases, service, FakeModel(), repeat=3, concurrency=4, dialect="gemini", timeout=30.0
)
assert_type(report, EvalReport)


def fresh(case: EvalCase) -> CaseSetup:
    def after_turn(index: int, result: ToolChatResult[Any]) -> str | None:
        return None

    return CaseSetup(service=ToolService(), after_turn=after_turn)


assert_type(run_eval(cases, fresh, FakeModel()), EvalReport)
assert_type(run_eval(cases, lambda case: ToolService(), FakeModel()), EvalReport)


async def asynchronous() -> None:
    assert_type(
        await arun_eval(cases, service, FakeModel(), on_attempt=lambda c, i, a: None), EvalReport
    )


assert_type(report.summary.score, float | None)
assert_type(report.summary.pass_hat_k, dict[str, float])
assert_type(report.summary.tokens, Tokens)
assert_type(report.summary.tokens.cost, Decimal | None)
assert_type(report.tools, dict[str, ToolStats])
assert_type(report.tools["f"].accuracy, float | None)
assert_type(report.cases, list[CaseReport])
assert_type(report.cases[0].attempts[0].turns, list[TurnScore])
assert_type(report.cases[0].attempts[0].problems(), list[str])
assert_type(report.to_json(), str)
assert_type(render_html(report), str)
assert_type(EvalReport.load("report.json"), EvalReport)
comparison = compare(report, report)
assert_type(comparison, Comparison)
assert_type([c.id for c in comparison.regressions], list[str])
suite = load_bfcl("BFCL_v4_simple_python.json", limit=10)
assert_type(suite, BfclSuite)
assert_type(run_eval(suite.cases, suite.setup, FakeModel()), EvalReport)
assert_type(EvalSetupError(["x"]).problems, list[str])

# Misuse that must stay a type error.
run_eval(cases, service, FakeModel(), dialect="xml")  # type: ignore[arg-type]
run_eval(cases, service, FakeModel(), repeats=3)  # type: ignore[call-arg]
run_eval(cases, "tools.py:tools", FakeModel())  # type: ignore[arg-type]
EvalCase(id="a", input=5)  # type: ignore[arg-type]
