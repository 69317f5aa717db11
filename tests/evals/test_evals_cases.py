"""Cases files: JSON lines and YAML, and every way one can be wrong (named by line and field)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from agentforge_typed import SystemMessage, UserMessage
from agentforge_typed.evals import CasesError, EvalCase, load_cases

FIXTURE = Path(__file__).parents[1] / "fixtures" / "evals" / "weather.jsonl"
HAS_YAML = importlib.util.find_spec("yaml") is not None


def write(tmp_path: Path, text: str, name: str = "cases.jsonl") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_fixture_reads_as_the_issue_writes_cases() -> None:
    cases = load_cases(FIXTURE)
    first = cases[0]
    assert first.id == "weather-1"
    assert first.input == "What's the weather in Paris in fahrenheit?"
    assert first.expected_calls is not None
    (call,) = first.expected_calls
    assert (call.name, call.arguments) == (
        "get_weather",
        {"city": ["Paris", "paris"], "unit": ["fahrenheit"]},
    )
    assert first.expected_output is None and not first.ordered and first.strings == "bfcl"
    assert [c.id for c in cases] == ["weather-1", "forecast-1", "both-1", "chat-1"]
    assert cases[3].expected_calls == []


def test_blank_lines_are_skipped_and_an_input_may_be_a_conversation(tmp_path: Path) -> None:
    text = (
        '\n{"id": "a", "input": [{"role": "system", "text": "Be brief."}, '
        '{"role": "user", "content": "hi"}], "tags": ["x"], "max_rounds": 2, "tools": ["t"]}\n\n'
    )
    (case,) = load_cases(write(tmp_path, text))
    assert isinstance(case.input, list)
    assert isinstance(case.input[0], SystemMessage) and isinstance(case.input[1], UserMessage)
    assert (case.max_rounds, case.tools, case.tags) == (2, ["t"], ["x"])


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": "a", "input": "x"', "cases.jsonl:2: not JSON: Expecting ',' delimiter"),
        ('{"input": "x"}', "cases.jsonl:2: id: required, and missing"),
        (
            '{"id": "a", "input": "x", "expected_call": []}',
            "cases.jsonl:2: expected_call: not a field of a case",
        ),
        (
            '{"id": "a", "input": "x", "expected_calls": [{"name": "f", "arguments": {"x": 5}}]}',
            "cases.jsonl:2: expected_calls[0].arguments.x: Input should be a valid list",
        ),
        (
            '{"id": "a", "input": "x", "expected_calls": [{"name": "f", "arguments": {"x": []}}]}',
            "cases.jsonl:2: expected_calls[0].arguments: Value error, 'x' lists no acceptable value",
        ),
        (
            '{"id": "a", "input": "x", "max_rounds": 0}',
            "cases.jsonl:2: max_rounds: Input should be greater than or equal to 1",
        ),
        (
            '{"id": "a", "input": "x", "check": "nocolon"}',
            "cases.jsonl:2: check: Value error, expected module:callable",
        ),
        (
            '{"id": "a", "input": "x", "strings": "fuzzy"}',
            "cases.jsonl:2: strings: Input should be 'bfcl' or 'exact'",
        ),
        ('{"id": "", "input": "x"}', "cases.jsonl:2: id: String should have at least 1 character"),
        (
            '{"id": "first", "input": "x"}',
            "cases.jsonl:2: id 'first' is already the id of the case on line 1",
        ),
        ("[1, 2]", "cases.jsonl:2: the case: Input should be a valid dictionary"),
    ],
)
def test_a_malformed_line_names_its_line_and_field(tmp_path: Path, line: str, message: str) -> None:
    path = write(tmp_path, '{"id": "first", "input": "x"}\n' + line + "\n")
    with pytest.raises(CasesError) as raised:
        load_cases(path)
    assert str(raised.value).startswith(f"{tmp_path}/{message}"), str(raised.value)
    assert raised.value.line == 2


def test_an_input_of_the_wrong_shape_names_the_input(tmp_path: Path) -> None:
    with pytest.raises(CasesError, match=r"cases.jsonl:1: input"):
        load_cases(write(tmp_path, '{"id": "a", "input": 5}\n'))


def test_a_file_that_cannot_be_read_or_holds_nothing(tmp_path: Path) -> None:
    with pytest.raises(CasesError, match=r"missing\.jsonl: cannot be read"):
        load_cases(tmp_path / "missing.jsonl")
    (tmp_path / "binary.jsonl").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(CasesError, match=r"binary\.jsonl: cannot be read"):
        load_cases(tmp_path / "binary.jsonl")
    with pytest.raises(CasesError, match=r"empty\.jsonl: holds no case"):
        load_cases(write(tmp_path, "\n\n", "empty.jsonl"))


@pytest.mark.skipif(not HAS_YAML, reason="PyYAML is not installed (the evals extra)")
def test_yaml_cases_name_their_line(tmp_path: Path) -> None:
    text = (
        "- id: a\n"
        "  input: hi\n"
        "  expected_calls:\n"
        "    - name: get_weather\n"
        "      arguments: {city: [Paris, paris]}\n"
        "- id: b\n"
        "  input: hi\n"
        "  max_rounds: zero\n"
    )
    with pytest.raises(
        CasesError, match=r"cases.yaml:6: max_rounds: Input should be a valid integer"
    ):
        load_cases(write(tmp_path, text, "cases.yaml"))
    (first,) = load_cases(write(tmp_path, text.split("- id: b")[0], "cases.yml"))
    assert first.expected_calls is not None
    assert first.expected_calls[0].arguments == {"city": ["Paris", "paris"]}
    with pytest.raises(CasesError, match=r"bad.yaml:1: expected a list of cases"):
        load_cases(write(tmp_path, "id: a\n", "bad.yaml"))
    with pytest.raises(CasesError, match=r"broken.yaml:3: not YAML"):
        load_cases(write(tmp_path, "- id: a\n  input: [unclosed\n", "broken.yaml"))
    with pytest.raises(CasesError, match="holds no case"):
        load_cases(write(tmp_path, "", "empty.yaml"))


def test_yaml_without_pyyaml_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "yaml", None)  # what an absent module imports as
    with pytest.raises(CasesError, match=r"agentforge-typed\[evals\]"):
        load_cases(write(tmp_path, "- id: a\n  input: hi\n", "cases.yaml"))


def test_all_turns_starts_with_the_case_s_own() -> None:
    case = EvalCase.model_validate(
        {
            "id": "a",
            "input": "one",
            "tools": ["x"],
            "turns": [{"input": "two", "expected_calls": []}],
        }
    )
    first, second = case.all_turns()
    assert (first.input, first.tools, first.expected_calls) == ("one", ["x"], None)
    assert (second.input, second.tools, second.expected_calls) == ("two", None, [])


def test_a_conversation_input_names_the_message_at_fault(tmp_path: Path) -> None:
    line = '{"id": "a", "input": [{"role": "user", "content": "hi"}, {"role": "user"}]}\n'
    with pytest.raises(CasesError, match=r"cases\.jsonl:1: input\[1\]\.user\.content: required"):
        load_cases(write(tmp_path, line))
    with pytest.raises(CasesError, match=r"cases\.jsonl:1: input: Input should be a valid string"):
        load_cases(write(tmp_path, '{"id": "a", "input": 5}\n'))
