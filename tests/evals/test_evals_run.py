"""Running cases through the loop: `run_eval` / `arun_eval` against `FakeModel` and scripted
`FunctionModel`s, every error path of a case, concurrency, dialects, multi-turn and checks."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    FakeModel,
    FunctionModel,
    ModelError,
    ToolCall,
    ToolChatResult,
    ToolService,
    UserMessage,
    tool,
)
from agentforge_typed.evals import (
    CaseSetup,
    EvalCase,
    EvalSetupError,
    arun_eval,
    cases_from,
    run_eval,
)
from agentforge_typed.providers import render_schema
from agentforge_typed.providers._openai_wire import map_tool


@tool
def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """The weather in a city.

    Args:
        city: The city's name.
        unit: The temperature unit.
    """
    return f"sunny in {city}, 20 {unit}"


@tool
def get_time(zone: str) -> str:
    """The time in a time zone."""
    return f"noon in {zone}"


def service() -> ToolService:
    return ToolService([get_weather, get_time], groups={"clock": [tool(name="now")(_now)]})


def _now() -> str:
    """Now."""
    return "now"


def case(**fields: Any) -> EvalCase:
    return EvalCase.model_validate({"id": "c", "input": "hi", **fields})


def weather_case(case_id: str = "w", **more: Any) -> EvalCase:
    return case(
        id=case_id,
        input=f"weather in Paris ({case_id})",
        expected_calls=[
            {"name": "get_weather", "arguments": {"city": ["Paris"], "unit": ["", "celsius"]}}
        ],
        **more,
    )


def calling(*answers: Any) -> FunctionModel:
    """A model that answers the first user turn with `answers[0]`'s calls, and text after a tool
    result (or, for later turns, the next answer)."""

    def fn(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        if messages[-1].role == "tool":
            return AiMessage(text="done")
        turn = sum(isinstance(m, UserMessage) for m in messages) - 1
        answer = answers[min(turn, len(answers) - 1)]
        if isinstance(answer, str):
            return AiMessage(text=answer)
        return AiMessage(
            tool_calls=[
                ToolCall(id=f"x{i}", name=n, arguments=a) for i, (n, a) in enumerate(answer)
            ]
        )

    return FunctionModel(fn)


def test_a_right_call_passes_and_the_report_counts_it() -> None:
    model = calling([("get_weather", '{"city": "paris"}')])
    report = run_eval([weather_case()], service(), model, repeat=3)
    (result,) = report.cases
    assert result.passed and result.passes == 3
    summary = report.summary
    assert (summary.attempts, summary.passed, summary.score) == (3, 3, 1.0)
    assert summary.tool_selection.ok == summary.tool_selection.total == 3
    assert (summary.arguments.ok, summary.arguments.total) == (6, 6)
    assert summary.pass_hat_k == {"1": 1.0, "2": 1.0, "3": 1.0}
    assert summary.rounds == 2.0  # the call, then the answer
    assert report.tools["get_weather"].accuracy == 1.0
    attempt = result.attempts[0]
    assert attempt.text == "done" and attempt.latency_ms > 0 and attempt.error is None


def test_fake_model_calls_every_tool_and_is_scored_so() -> None:
    report = run_eval([weather_case(), case(id="none", expected_calls=[])], service(), FakeModel())
    weather, none = report.cases
    assert not weather.passed and not none.passed
    turn = weather.attempts[0].turns[0]
    assert [c.name for c in turn.calls] == ["get_weather", "get_time", "now"]
    assert turn.unexpected == [1, 2] and not turn.tool_selection
    assert report.summary.irrelevance.ok == 0 and report.summary.irrelevance.total == 1
    assert report.summary.tokens.total > 0  # FakeModel estimates its usage
    assert report.tools["get_time"].unexpected == 2


def test_pass_hat_k_is_estimated_from_each_case_s_passes() -> None:
    answers = iter(["Paris", "Rome", "Paris", "Paris"])

    def fn(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        if messages[-1].role == "tool":
            return AiMessage(text="done")
        city = next(answers)
        return AiMessage(
            tool_calls=[ToolCall(id="x", name="get_weather", arguments=f'{{"city": "{city}"}}')]
        )

    report = run_eval([weather_case()], service(), FunctionModel(fn), repeat=4, concurrency=1)
    # 3 passes of 4: pass^1 = 3/4, pass^2 = C(3,2)/C(4,2) = 1/2, pass^3 = 1/4, pass^4 = 0.
    assert report.summary.pass_hat_k == {"1": 0.75, "2": 0.5, "3": 0.25, "4": 0.0}
    assert not report.cases[0].passed


def test_a_model_that_fails_on_one_case_never_stops_the_others() -> None:
    def fn(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        text = messages[0].content if isinstance(messages[0], UserMessage) else ""
        if "boom" in str(text):
            raise ModelError("the server fell over", status_code=500)
        if messages[-1].role == "tool":
            return AiMessage(text="done")
        return AiMessage(
            tool_calls=[ToolCall(id="x", name="get_weather", arguments='{"city": "Paris"}')]
        )

    cases = [weather_case("a"), weather_case("boom"), weather_case("c")]
    report = run_eval(cases, service(), FunctionModel(fn))
    assert [c.passed for c in report.cases] == [True, False, True]
    error = report.cases[1].attempts[0].error
    assert error is not None
    assert (error.kind, error.type, error.scored) == ("model", "ModelError", False)
    assert "the server fell over" in error.message
    assert report.summary.errors == report.summary.unscored == 1


def test_the_loop_s_own_verdict_is_a_scored_failure_and_keeps_the_first_answer() -> None:
    # The model calls forever: the round limit ends the run; its first answer is still scored.
    model = FunctionModel(
        lambda messages, parameters: AiMessage(
            tool_calls=[ToolCall(id="x", name="get_weather", arguments='{"city": "Paris"}')]
        )
    )
    report = run_eval([weather_case(max_rounds=2)], service(), model)
    attempt = report.cases[0].attempts[0]
    assert attempt.error is not None
    assert (attempt.error.kind, attempt.error.type) == ("run", "UsageLimitExceededError")
    assert attempt.turns[0].passed and not attempt.passed
    assert attempt.rounds == 2
    assert report.summary.unscored == 0


def test_a_case_naming_an_unknown_tool_is_reported_before_any_model_call() -> None:
    asked: list[object] = []

    def fn(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        asked.append(messages)
        return AiMessage(text="hi")

    cases = [
        weather_case("fine"),
        case(id="typo", expected_calls=[{"name": "get_wether"}]),
        case(id="selected", tools=["get_time"], expected_calls=[{"name": "get_weather"}]),
        case(id="bad-group", tools=["group:nope"]),
        case(id="bad-name", tools=["nope"]),
        case(id="bad-check", check="tests.nowhere:check"),
    ]
    with pytest.raises(EvalSetupError) as raised:
        run_eval(cases, service(), FunctionModel(fn))
    assert asked == []
    assert raised.value.problems == [
        "case typo: expects a call of 'get_wether', which is not a tool of the target; its "
        "tools: get_weather, get_time, now",
        "case selected: expects a call of 'get_weather', which is not offered; its tools: get_time",
        "case bad-group: tools names the group 'nope', which the target does not have; its "
        "groups: clock",
        "case bad-name: tools names 'nope', which is not a tool of the target; its tools: "
        "get_weather, get_time, now",
        "case bad-check: check 'tests.nowhere:check' cannot be loaded: ModuleNotFoundError: "
        "No module named 'tests.nowhere'",
    ]


def test_a_group_selection_offers_its_tools() -> None:
    model = calling([("now", "{}")])
    report = run_eval(
        [case(tools=["group:clock"], expected_calls=[{"name": "now"}])], service(), model
    )
    assert report.cases[0].passed


def test_expected_output_is_compared_to_the_typed_output() -> None:
    class Forecast(BaseModel):
        city: str
        degrees: int

    def fn(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        return AiMessage(
            tool_calls=[
                ToolCall(id="o", name="final_result", arguments='{"city": "Oslo", "degrees": 4}')
            ]
        )

    right = case(id="right", expected_output={"city": "Oslo", "degrees": 4})
    wrong = case(id="wrong", expected_output={"city": "Oslo", "degrees": 4.5})
    report = run_eval([right, wrong], ToolService(), FunctionModel(fn), output_type=Forecast)
    assert [c.passed for c in report.cases] == [True, False]
    output = report.cases[1].attempts[0].output
    assert output is not None and output.got == {"city": "Oslo", "degrees": 4}
    assert report.cases[1].attempts[0].problems() == ['output: got {"city": "Oslo", "degrees": 4}']


def test_expected_output_without_an_output_type_is_the_final_text() -> None:
    report = run_eval(
        [case(expected_output="hello"), case(id="d", expected_output="bye")],
        ToolService(),
        calling("hello"),
    )
    assert [c.passed for c in report.cases] == [True, False]


def check_city(result: ToolChatResult[Any], case: EvalCase) -> bool:
    assert result.tool_executions, "no tool ran"
    return "Paris" in result.tool_executions[0].result.text


def check_false(result: ToolChatResult[Any], case: EvalCase) -> bool:
    return False


def check_raises(result: ToolChatResult[Any], case: EvalCase) -> bool:
    raise RuntimeError("the check itself is broken")


async def check_async(result: ToolChatResult[Any], case: EvalCase) -> None:
    await asyncio.sleep(0)
    assert case.id == "async"


def test_a_check_passes_fails_by_false_or_assertion_and_errors_apart() -> None:
    here = __name__
    cases = [
        weather_case("ok", check=f"{here}:check_city"),
        weather_case("false", check=f"{here}:check_false"),
        weather_case("raises", check=f"{here}:check_raises"),
        weather_case("async", check=f"{here}:check_async"),
    ]
    model = calling([("get_weather", '{"city": "Paris"}')])
    report = run_eval(cases, service(), model)
    outcomes = {c.id: c.attempts[0] for c in report.cases}
    assert outcomes["ok"].passed and outcomes["async"].passed
    no_tool = run_eval([case(check=f"{here}:check_city")], service(), calling("text")).cases[0]
    assert no_tool.attempts[0].problems() == ["check: no tool ran"]
    assert outcomes["false"].problems() == ["check: the check returned False"]
    error = outcomes["raises"].error
    assert error is not None and (error.kind, error.type) == ("check", "RuntimeError")


def test_turns_are_scored_one_by_one() -> None:
    model = calling(
        [("get_weather", '{"city": "Paris"}')], "no tool needed", [("get_time", '{"zone": "UTC"}')]
    )
    multi = case(
        input="weather?",
        expected_calls=[{"name": "get_weather", "arguments": {"city": ["Paris"]}}],
        turns=[
            {"input": "thanks", "expected_calls": []},
            {
                "input": "time in UTC?",
                "expected_calls": [{"name": "get_time", "arguments": {"zone": ["utc"]}}],
            },
        ],
    )
    report = run_eval([multi], service(), model)
    attempt = report.cases[0].attempts[0]
    assert attempt.passed, attempt.problems()
    assert [t.passed for t in attempt.turns] == [True, True, True]
    assert attempt.rounds == 5  # call + answer, answer, call + answer
    assert report.summary.irrelevance.total == 1


def test_a_case_setup_builds_fresh_tools_per_attempt_and_checks_each_turn() -> None:
    built: list[list[str]] = []

    def target(case: EvalCase) -> CaseSetup:
        seen: list[str] = []
        built.append(seen)

        @tool
        def record(word: str) -> str:
            """Record a word."""
            seen.append(word)
            return "ok"

        def after_turn(index: int, result: ToolChatResult[Any]) -> str | None:
            return None if seen == ["hello"] else f"recorded {seen}"

        return CaseSetup(service=ToolService([record]), after_turn=after_turn)

    good = calling([("record", '{"word": "hello"}')])
    report = run_eval([case(id="a")], target, good, repeat=2)
    assert report.cases[0].passed
    assert len(built) == 2  # the one built to check the case serves the first attempt
    bad = calling([("record", '{"word": "bye"}')])
    failed = run_eval([case(id="b")], target, bad).cases[0].attempts[0]
    assert failed.problems() == ["check: turn 0: recorded ['bye']"]


def test_a_target_that_fails_to_build_is_a_setup_problem() -> None:
    def target(case: EvalCase) -> ToolService:
        raise OSError("no database")

    with pytest.raises(
        EvalSetupError, match="case c: building its target failed: OSError: no database"
    ):
        run_eval([case()], target, FakeModel())


def test_each_attempt_ends_within_its_timeout() -> None:
    async def slow(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        await asyncio.sleep(30)
        return AiMessage(text="late")

    report = run_eval([case(), case(id="d")], ToolService(), FunctionModel(slow), timeout=0.2)
    for result in report.cases:
        error = result.attempts[0].error
        assert error is not None and (error.kind, error.message) == (
            "timeout",
            "no result within 0.2s",
        )
        assert result.attempts[0].latency_ms < 5000


async def test_no_more_than_concurrency_attempts_are_in_flight() -> None:
    flying = peak = 0

    async def fn(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        nonlocal flying, peak
        flying += 1
        peak = max(peak, flying)
        await asyncio.sleep(0.01)
        flying -= 1
        return AiMessage(text="hi")

    cases = [case(id=str(i)) for i in range(12)]
    report = await arun_eval(cases, ToolService(), FunctionModel(fn), concurrency=3, repeat=2)
    assert peak == 3 and report.summary.attempts == 24


def test_on_attempt_sees_every_attempt_as_it_finishes() -> None:
    seen: list[tuple[str, int]] = []
    run_eval(
        [case(id="a"), case(id="b")],
        ToolService(),
        calling("hi"),
        repeat=2,
        on_attempt=lambda c, i, a: seen.append((c.id, i)),
    )
    assert sorted(seen) == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]


def test_options_out_of_range_are_refused() -> None:
    for options in ({"repeat": 0}, {"concurrency": 0}, {"timeout": 0}, {"dialect": "xml"}):
        with pytest.raises(ValueError):
            run_eval([case()], ToolService(), FakeModel(), **options)


def test_run_eval_works_where_an_event_loop_runs() -> None:
    async def inside() -> int:
        return run_eval([case()], ToolService(), calling("hi")).summary.attempts

    assert asyncio.run(inside()) == 1


# -- dialects -------------------------------------------------------------------------------------


def test_a_dialect_renders_what_the_model_is_sent() -> None:
    sent: list[Any] = []

    def fn(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        sent.append(parameters.tools)
        return AiMessage(text="hi")

    run_eval([case()], ToolService([get_weather]), FunctionModel(fn), dialect="gemini")
    (spec,) = sent[0]
    assert spec.parameters == render_schema(get_weather.specification.parameters, "gemini")
    assert not spec.strict_schema
    run_eval([case()], ToolService([get_weather]), FunctionModel(fn), dialect="openai-strict")
    (strict,) = sent[1]
    assert strict.strict_schema
    # What the OpenAI wire then sends is exactly what a strict_schema tool sends.
    own = get_weather.specification.model_copy(update={"strict_schema": True})
    assert map_tool(strict) == map_tool(own)


def test_under_openai_strict_a_null_for_an_optional_argument_is_left_out() -> None:
    model = calling([("get_weather", '{"city": "Paris", "unit": null}')])
    plain = run_eval([weather_case()], service(), model)
    strict = run_eval([weather_case()], service(), model, dialect="openai-strict")
    assert not plain.cases[0].attempts[0].turns[0].passed
    assert strict.cases[0].attempts[0].turns[0].passed
    assert strict.dialect == "openai-strict"


def test_a_strict_schema_tool_reads_a_null_as_a_left_out_argument() -> None:
    @tool(strict_schema=True)
    def forecast(city: str, days: int = 3) -> str:
        """A forecast."""
        return city

    model = calling([("forecast", '{"city": "Oslo", "days": null}')])
    wanted = case(
        expected_calls=[{"name": "forecast", "arguments": {"city": ["Oslo"], "days": ["", 3]}}]
    )
    attempt = run_eval([wanted], ToolService([forecast]), model).cases[0].attempts[0]
    assert attempt.passed, attempt.problems()
    assert attempt.turns[0].calls[0].refused is None  # the loop read it so too


def test_a_dialect_that_cannot_render_a_tool_is_found_before_any_model_call() -> None:
    class Node(BaseModel):
        children: list[Node]

    @tool
    def walk(tree: Node) -> str:
        """Walk a tree."""
        return "ok"

    with pytest.raises(EvalSetupError, match="the gemini dialect cannot render"):
        run_eval([case()], ToolService([walk]), FakeModel(), dialect="gemini")


def test_a_shared_service_is_safe_across_threads_of_attempts() -> None:
    # The sync facade from several threads at once: each gets its own loop.
    results: list[int] = []

    def one() -> None:
        results.append(run_eval([weather_case()], service(), FakeModel()).summary.attempts)

    threads = [threading.Thread(target=one) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [1, 1, 1]


def test_cases_from_pairs_and_the_model_name() -> None:
    cases = cases_from([(1, {"id": "a", "input": "hi"})])
    report = run_eval(cases, ToolService(), calling("x"), model_name="local:small")
    assert report.model == "local:small"
    assert run_eval(cases, ToolService(), FakeModel()).model == "fake"


def test_an_answer_s_text_is_kept_to_its_cap() -> None:
    from agentforge_typed.evals._run import MAX_TEXT_CHARS

    for size, kept in ((MAX_TEXT_CHARS, MAX_TEXT_CHARS), (MAX_TEXT_CHARS + 1, MAX_TEXT_CHARS)):
        report = run_eval([case()], ToolService(), calling("x" * size))
        text = report.cases[0].attempts[0].text
        assert text is not None and len(text) == kept
        assert text.endswith("x" if size == kept else "…")
