"""An eval of a dozen cases against the real llama.cpp server and its small model (see
`conftest.py`): the report must be complete and consistent, whatever the model scores.

The tool returns at once (`ReturnBehavior.IMMEDIATE`): the first answer is what is scored, and a
run that ends with it makes half the requests on a server that answers one at a time."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_llamacpp import EXAMPLE, PARAMETERS

from agentforge_typed import ChatModel, ReturnBehavior, ToolService, get_model, tool
from agentforge_typed.cli import main
from agentforge_typed.evals import EvalCase, EvalReport, render_html, run_eval

CITIES = ("Oslo", "Lima", "Cairo", "Tokyo", "Quito", "Paris", "Berlin", "Madrid", "Nairobi")
REPEAT = 2
ANSWERS = PARAMETERS.model_copy(update={"max_tokens": 40})
"""Room for a call (about 25 tokens) or a short answer: the server answers one request at a time."""


@tool(return_behavior=ReturnBehavior.IMMEDIATE)
def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: The city's name.
    """
    return f"sunny in {city}"


def cases() -> list[EvalCase]:
    history = [m.model_dump(mode="json") for m in EXAMPLE]
    made = [
        {
            "id": f"weather-{city.lower()}",
            "input": [
                *history,
                {
                    "role": "user",
                    "content": f"What is the weather in {city}? Answer with a tool call.",
                },
            ],
            "expected_calls": [{"name": "get_weather", "arguments": {"city": [city]}}],
            "tags": ["calls"],
        }
        for city in CITIES
    ]
    made += [
        {
            "id": f"chat-{n}",
            "input": [*history, {"role": "user", "content": text}],
            "expected_calls": [],
            "tags": ["irrelevance"],
        }
        for n, text in enumerate(("Say hello.", "What is two plus two?", "Thank you, goodbye."))
    ]
    return [EvalCase.model_validate(case) for case in made]


@pytest.fixture
def model(llama_server: str) -> Iterator[ChatModel]:
    built = get_model("llamacpp:gemma-3-270m", base_url=llama_server, max_retries=0, timeout=120)
    yield built
    built.close()  # type: ignore[attr-defined]  # an HTTP model: its sync client


def test_an_eval_of_a_dozen_cases_reports_every_attempt_consistently(model: ChatModel) -> None:
    report = run_eval(
        cases(),
        ToolService([get_weather], max_round_trips=3),
        model,
        repeat=REPEAT,
        concurrency=2,
        parameters=ANSWERS,
        timeout=300,
        model_name="llamacpp:gemma-3-270m",
    )
    assert [c.id for c in report.cases] == [c.id for c in cases()] and not report.unfinished
    attempts = [a for c in report.cases for a in c.attempts]
    summary = report.summary
    assert summary.cases == 12 and summary.attempts == len(attempts) == 12 * REPEAT
    assert summary.passed == sum(a.passed for a in attempts)
    assert summary.score == summary.passed / summary.attempts
    assert summary.unscored == 0, [a.error for a in attempts if a.error]  # the server answered
    assert summary.tokens.total == sum(a.tokens.total for a in attempts) > 0
    assert set(summary.pass_hat_k) == {"1", "2"}
    assert summary.pass_hat_k["1"] == pytest.approx(summary.score)
    assert summary.pass_hat_k["2"] <= summary.pass_hat_k["1"]
    selection = irrelevance = 0
    for case in report.cases:
        assert len(case.attempts) == REPEAT
        assert case.irrelevance == case.id.startswith("chat-")
        for attempt in case.attempts:
            assert attempt.rounds >= 1 and attempt.latency_ms > 0 and attempt.tokens.total > 0
            (turn,) = attempt.turns
            assert turn.expected is not None and turn.passed is not None
            paired = [check.call for check in turn.expected if check.call is not None]
            # Every call is either paired with an expected one (of its name) or unexpected.
            assert sorted([*paired, *turn.unexpected]) == list(range(len(turn.calls)))
            for check in turn.expected:
                if check.call is not None:
                    assert turn.calls[check.call].name == check.name
                    assert check.ok == all(a.ok for a in check.arguments)
            assert attempt.passed == (turn.passed and attempt.error is None)
            if case.irrelevance:
                irrelevance += 1
                assert turn.passed == (not turn.calls)
            else:
                selection += 1
                assert turn.tool_selection == ([c.name for c in turn.calls] == ["get_weather"])
    assert (summary.tool_selection.total, summary.irrelevance.total) == (selection, irrelevance)
    stats = report.tools["get_weather"]
    assert (
        stats.expected == len(CITIES) * REPEAT and stats.correct <= stats.selected <= stats.expected
    )
    # The report reads back as it was, and its page plots the tool.
    assert EvalReport.model_validate_json(report.to_json()) == report
    page = render_html(report)
    svg = ET.fromstring(page[page.index("<svg") : page.index("</svg>") + 6])
    assert [g.get("data-tool") for g in svg.iter("{http://www.w3.org/2000/svg}g")] == [
        "get_weather"
    ]


def test_the_eval_command_against_the_server(
    llama_server: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_text(
        "\n".join(c.model_dump_json() for c in cases() if c.id in ("weather-oslo", "chat-0")) + "\n"
    )
    (tmp_path / "tools.py").write_text(
        "from test_llamacpp_evals import get_weather\n\ntools = [get_weather]\n"
    )
    monkeypatch.setenv("LLAMACPP_BASE_URL", llama_server)
    report = tmp_path / "r.json"
    status = main(
        [
            "eval",
            str(path),
            "--target",
            f"{tmp_path / 'tools.py'}:tools",
            "--model",
            "llamacpp:gemma-3-270m",
            "--temperature",
            "0",
            "--max-tokens",
            "60",
            "--json",
            str(report),
            "--html",
            str(tmp_path / "r.html"),
        ]
    )
    out, err = capsys.readouterr()
    assert status == 0, err
    loaded = EvalReport.load(report)
    assert [c.id for c in loaded.cases] == ["weather-oslo", "chat-0"]
    assert loaded.summary.tokens.total > 0
    assert json.loads(report.read_text())["model"] == "llamacpp:gemma-3-270m"
    assert out.splitlines()[0].startswith("case ")
