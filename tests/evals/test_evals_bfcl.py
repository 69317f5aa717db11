"""BFCL v4 data as cases: small files made here in BFCL's exact format (tests/fixtures/evals/bfcl,
one per category kind), never a downloaded data set."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agentforge_typed import AiMessage, ChatMessage, ChatRequestParameters, FunctionModel, ToolCall
from agentforge_typed.evals import BFCL_CATEGORIES, load_bfcl, run_eval

DATA = Path(__file__).parents[1] / "fixtures" / "evals" / "bfcl"
sys.path.insert(0, str(DATA.parent))
import bfcl_backends  # noqa: E402  (the fixture backend, beside the data)


def answering(*turns: Any) -> FunctionModel:
    """Answers each user turn: a list of `(name, arguments)` calls (then text once the results
    are in), or a text."""
    offered: list[list[str]] = []

    def fn(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        offered.append([spec.name for spec in parameters.tools or ()])
        if messages[-1].role == "tool":
            return AiMessage(text="done")
        turn = sum(m.role == "user" for m in messages) - 1
        answer = turns[turn]
        if isinstance(answer, str):
            return AiMessage(text=answer)
        return AiMessage(
            tool_calls=[
                ToolCall(id=f"c{i}", name=name, arguments=json.dumps(arguments))
                for i, (name, arguments) in enumerate(answer)
            ]
        )

    model = FunctionModel(fn)
    model.offered = offered  # type: ignore[attr-defined]
    return model


def test_simple_converts_functions_to_schema_tools_and_answers_to_expected_calls() -> None:
    suite = load_bfcl(DATA / "BFCL_v4_simple_python.json")
    assert suite.category == "simple_python"
    first, second = suite.cases
    assert first.input[0].content.startswith("Find the area")  # type: ignore[union-attr]
    assert first.expected_calls is not None and second.expected_calls is not None
    assert first.expected_calls[0].arguments == {"base": [10], "height": [5], "unit": ["units", ""]}
    # `.` in a name is sent as `_`, as BFCL does for OpenAI-style models.
    assert second.expected_calls[0].name == "math_factorial"
    service = suite.setup(second).service
    (spec,) = service.specifications
    assert spec.name == "math_factorial"
    assert spec.parameters["type"] == "object"
    assert spec.parameters["properties"]["number"]["type"] == "integer"


def test_a_float_is_a_number_said_so_as_bfcl_sends_it() -> None:
    suite = load_bfcl(DATA / "BFCL_v4_irrelevance.json")
    (case,) = suite.cases
    assert case.expected_calls == []
    weight = suite.setup(case).service.specifications[0].parameters["properties"]["weight"]
    assert weight == {
        "type": "number",
        "format": "float",
        "description": "Weight of the individual in kilograms. This is a float type value.",
    }


def test_a_simple_case_is_scored_on_the_first_answer_and_its_tools_never_run() -> None:
    suite = load_bfcl(DATA / "BFCL_v4_simple_python.json", limit=1)
    right = answering([("calculate_triangle_area", {"base": 10, "height": 5})])
    report = run_eval(suite.cases, suite.setup, right)
    attempt = report.cases[0].attempts[0]
    assert attempt.passed and attempt.rounds == 1  # returned immediately after the call
    wrong = answering([("calculate_triangle_area", {"base": "10", "height": 5})])
    failed = run_eval(suite.cases, suite.setup, wrong).cases[0].attempts[0]
    assert not failed.turns[0].passed
    assert failed.turns[0].calls[0].refused is not None  # the schema says integer


def test_parallel_calls_in_any_order() -> None:
    suite = load_bfcl(DATA / "BFCL_v4_parallel.json")
    model = answering(
        [
            ("spotify_play", {"artist": "Maroon 5", "duration": 15}),
            ("spotify_play", {"artist": "taylor swift", "duration": 20}),
        ]
    )
    assert run_eval(suite.cases, suite.setup, model).cases[0].passed


def test_irrelevance_passes_when_no_call_is_made() -> None:
    suite = load_bfcl(DATA / "BFCL_v4_irrelevance.json")
    assert run_eval(suite.cases, suite.setup, answering("I cannot do that.")).cases[0].passed
    called = answering([("determine_body_mass_index", {"weight": 70, "height": 1.8})])
    assert not run_eval(suite.cases, suite.setup, called).cases[0].passed


def test_live_multiple_with_a_system_message_and_an_object_argument() -> None:
    suite = load_bfcl(DATA / "BFCL_v4_live_multiple.json")
    (case,) = suite.cases
    assert [m.role for m in case.input] == ["system", "user"]  # type: ignore[union-attr]
    preferences = {
        "size": "large",
        "milk_type": "coconut",
        "sweetness_level": "extra",
        "temperature": "hot",
        "special_instructions": "Served boiling-hot",
    }
    model = answering(
        [("ChaDri_change_drink", {"drink_id": "latte", "new_preferences": preferences})]
    )
    assert run_eval(suite.cases, suite.setup, model).cases[0].passed
    warm = answering(
        [
            (
                "ChaDri_change_drink",
                {"drink_id": "latte", "new_preferences": {**preferences, "temperature": "warm"}},
            )
        ]
    )
    attempt = run_eval(suite.cases, suite.setup, warm).cases[0].attempts[0]
    assert attempt.problems() == [
        'ChaDri_change_drink: new_preferences: .temperature: "warm" where "hot" is expected'
    ]


def test_multi_turn_runs_the_backends_and_compares_their_state_after_each_turn() -> None:
    suite = load_bfcl(DATA / "BFCL_v4_multi_turn_miss_func.json", backends=bfcl_backends.BACKENDS)
    (case,) = suite.cases
    assert case.tools == ["add_note", "count_notes"]  # delete_note: held out until turn 2
    assert [t.expected_calls for t in case.all_turns()] == [None, [], None]
    assert case.max_rounds == 20
    right = answering(
        [("add_note", {"title": "todo", "text": "buy milk"})],
        "I have no tool to delete notes.",
        [("delete_note", {"title": "todo"})],
    )
    report = run_eval([case], suite.setup, right)
    attempt = report.cases[0].attempts[0]
    assert attempt.passed, attempt.problems()
    assert attempt.check is not None and attempt.check.ok
    offered = right.offered  # type: ignore[attr-defined]
    assert offered[0] == ["add_note", "count_notes"]
    assert offered[-1] == ["add_note", "delete_note", "count_notes"]
    wrong = answering(
        [("add_note", {"title": "todo", "text": "buy bread"})],
        "no",
        [("delete_note", {"title": "old"})],
    )
    failed = run_eval([case], suite.setup, wrong).cases[0].attempts[0]
    assert failed.problems() == [
        "check: turn 0: the state of NoteBook differs from the ground truth's (notes)"
    ]
    early = answering(
        [("add_note", {"title": "todo", "text": "buy milk"})],
        [("add_note", {"title": "x", "text": "y"})],
        "no",
    )
    problems = run_eval([case], suite.setup, early).cases[0].attempts[0].problems()
    assert problems[0] == "turn 1: expected no call, got add_note"


def test_a_ground_truth_result_the_model_never_produced_fails_the_turn(tmp_path: Path) -> None:
    # The model reaches the ground truth's state but never makes the call whose result the
    # ground truth has.
    data = _copy(tmp_path)
    (data / "possible_answer" / "BFCL_v4_multi_turn_miss_func.json").write_text(
        json.dumps(
            {
                "id": "multi_turn_miss_func_0",
                "ground_truth": [
                    ["add_note(title='todo', text='buy milk')", "count_notes()"],
                    [],
                    [],
                ],
            }
        )
        + "\n"
    )
    suite = load_bfcl(data / "BFCL_v4_multi_turn_miss_func.json", backends=bfcl_backends)
    model = answering([("add_note", {"title": "todo", "text": "buy milk"})], "no", "no")
    attempt = run_eval(suite.cases, suite.setup, model).cases[0].attempts[0]
    assert attempt.problems() == [
        "check: turn 0: a ground truth call's result is missing from the model's: 2"
    ]


def _copy(tmp_path: Path) -> Path:
    target = tmp_path / "bfcl"
    shutil.copytree(DATA, target)
    return target


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: (d / "BFCL_v4_simple_python.json").write_text(""), "holds no entry"),
        (
            lambda d: (d / "BFCL_v4_simple_python.json").write_text("{oops\n"),
            "BFCL_v4_simple_python.json:1: not JSON",
        ),
        (lambda d: (d / "BFCL_v4_simple_python.json").write_text("[1]\n"), ":1: not a JSON object"),
        (
            lambda d: (d / "BFCL_v4_simple_python.json").write_text('{"id": "simple_java_0"}\n'),
            "the category 'simple_java' is not converted",
        ),
        (
            lambda d: (d / "BFCL_v4_simple_python.json").write_text(
                '{"id": "simple_python_9", "question": [[]], "function": []}\n'
            ),
            ":1: no function docs",
        ),
        (
            lambda d: (d / "possible_answer" / "BFCL_v4_simple_python.json").write_text(
                '{"id": "x"}\n'
            ),
            "'simple_python_0' has no ground truth",
        ),
        (
            lambda d: (d / "possible_answer" / "BFCL_v4_simple_python.json").unlink(),
            "possible_answer/BFCL_v4_simple_python.json: cannot be read",
        ),
        (
            lambda d: (d / "possible_answer" / "BFCL_v4_simple_python.json").write_text(
                '{"id": "simple_python_0", "ground_truth": [{"a": 1, "b": 2}]}\n'
            ),
            "a ground truth call is not {name: arguments}",
        ),
        (
            lambda d: (d / "BFCL_v4_simple_python.json").write_text(
                '{"id": "simple_python_0", "question": [[{"role": "tool", "content": "x"}]], "function": [{"name": "f"}]}\n'
            ),
            "a message of role 'tool'",
        ),
    ],
)
def test_files_not_in_bfcl_s_format_say_where(tmp_path: Path, change: Any, message: str) -> None:
    data = _copy(tmp_path)
    change(data)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("{", r"\{")):
        load_bfcl(data / "BFCL_v4_simple_python.json")


def test_multi_turn_needs_its_backends_and_valid_ground_truth(tmp_path: Path) -> None:
    questions = DATA / "BFCL_v4_multi_turn_miss_func.json"
    with pytest.raises(ValueError, match=r"pass backends= .* holding NoteBook"):
        load_bfcl(questions)
    with pytest.raises(ValueError, match="the backends hold no class 'NoteBook'"):
        load_bfcl(questions, backends={})
    data = _copy(tmp_path)
    (data / "possible_answer" / "BFCL_v4_multi_turn_miss_func.json").write_text(
        '{"id": "multi_turn_miss_func_0", "ground_truth": [["rm -rf /"], [], []]}\n'
    )
    with pytest.raises(ValueError, match="is not a call with literal arguments"):
        load_bfcl(data / "BFCL_v4_multi_turn_miss_func.json", backends=bfcl_backends.BACKENDS)
    with pytest.raises(ValueError, match=r"NoteBook\.json: cannot be read"):
        load_bfcl(questions, functions=tmp_path, backends=bfcl_backends.BACKENDS)


def test_the_categories_converted() -> None:
    assert "simple_python" in BFCL_CATEGORIES and "multi_turn_base" in BFCL_CATEGORIES
    assert "simple_java" not in BFCL_CATEGORIES
