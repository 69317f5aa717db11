"""Scoring an answer's calls: BFCL's rules (its `ast_checker.py`, cited per test) and where this
project is stricter on types."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentforge_typed import ToolCall
from agentforge_typed.evals import ExpectedCall, TurnScore
from agentforge_typed.evals._match import normalize, score_turn

SCHEMAS: dict[str, dict[str, Any]] = {
    "area": {
        "type": "object",
        "properties": {
            "base": {"type": "integer"},
            "height": {"type": "number"},
            "unit": {"type": "string"},
            "exact": {"type": "boolean"},
            "sides": {"type": "array", "items": {"type": "integer"}},
            "options": {"$ref": "#/$defs/Options"},
        },
        "$defs": {
            "Options": {"type": "object", "properties": {"digits": {"type": "integer"}}},
        },
    },
    "play": {
        "type": "object",
        "properties": {"artist": {"type": "string"}, "minutes": {"type": "integer"}},
    },
}


def calls(*pairs: tuple[str, Any]) -> list[ToolCall]:
    return [
        ToolCall(
            id=f"c{i}",
            name=name,
            arguments=arguments if isinstance(arguments, str) else json.dumps(arguments),
        )
        for i, (name, arguments) in enumerate(pairs)
    ]


def expect(name: str, **arguments: list[Any]) -> ExpectedCall:
    return ExpectedCall(name=name, arguments=arguments)


def one(arguments: Any, **expected: list[Any]) -> TurnScore:
    return score_turn([expect("area", **expected)], calls(("area", arguments)), SCHEMAS)


def why(score: TurnScore) -> list[str | None]:
    assert score.expected is not None
    return [a.why for check in score.expected for a in check.arguments if not a.ok]


def test_any_listed_value_matches_and_an_empty_string_lets_an_argument_be_left_out() -> None:
    score = one({"base": 10}, base=[10], unit=["units", ""])
    assert score.passed and score.tool_selection
    assert score.expected is not None
    (check,) = score.expected
    assert (check.call, check.ok) == (0, True)
    assert [(a.name, a.sent, a.ok) for a in check.arguments] == [
        ("base", True, True),
        ("unit", False, True),
    ]


def test_an_argument_neither_listed_nor_sent_when_required_is_missing() -> None:
    # BFCL: "Optional parameter ... not provided and not marked as optional."
    score = one({"base": 10}, base=[10], unit=["units"])
    assert not score.passed
    assert why(score) == ["missing"]


def test_an_argument_the_model_sends_that_is_not_listed_fails() -> None:
    # BFCL: "Unexpected parameter".
    score = one({"base": 10, "unit": "cm"}, base=[10])
    assert not score.passed
    assert why(score) == ["not an expected argument"]


def test_strings_compare_as_bfcl_standardises_them() -> None:
    # BFCL's standardize_string: no spaces nor ,./-_*^, lower case, ' as ".
    assert normalize("April 1, 2024") == normalize("april 1 2024") == "april12024"
    assert normalize("it's") == 'it"s'
    assert one({"unit": "Square-Meters"}, unit=["square meters"]).passed
    assert not one({"unit": "sq m"}, unit=["square meters"]).passed


def test_exact_strings_when_the_case_asks() -> None:
    answer = calls(("area", {"unit": "Square-Meters"}))
    exact = score_turn([expect("area", unit=["square meters"])], answer, SCHEMAS, strings="exact")
    assert not exact.passed
    assert score_turn(
        [expect("area", unit=["Square-Meters"])], answer, SCHEMAS, strings="exact"
    ).passed


@pytest.mark.parametrize(
    ("sent", "expected", "passed", "reason"),
    [
        # An integer parameter: only integers, as BFCL's type_checker and pydantic's strict mode.
        (5, [5], True, None),
        ("5", [5], False, '"5" is a string, where an integer is expected'),
        (5.0, [5], False, "5.0 is not an integer (the parameter is one)"),
        (True, [1], False, "true is a boolean, where an integer is expected"),
    ],
)
def test_an_integer_parameter_takes_integers_only(
    sent: Any, expected: list[Any], passed: bool, reason: str | None
) -> None:
    score = one({"base": sent}, base=expected)
    assert score.passed is passed
    assert why(score) == ([] if reason is None else [reason])


def test_a_number_parameter_takes_an_integer_and_a_boolean_is_never_a_number() -> None:
    # BFCL: "Allow python auto conversion from int to float".
    assert one({"height": 5}, height=[5.0]).passed
    assert one({"height": 2.5}, height=[2.5]).passed
    assert not one({"height": False}, height=[0.0]).passed
    assert not one({"exact": 1}, exact=[True]).passed
    assert one({"exact": True}, exact=[True]).passed


def test_a_list_matches_element_by_element_in_order() -> None:
    # BFCL's list_checker: the whole list is one of the possible answers.
    assert one({"sides": [3, 4, 5]}, sides=[[3, 4, 5]]).passed
    assert why(one({"sides": [4, 3, 5]}, sides=[[3, 4, 5]])) == ["[0]: 4 where 3 is expected"]
    assert why(one({"sides": [3, 4]}, sides=[[3, 4, 5]])) == ["2 items where 3 are expected"]
    assert why(one({"sides": [3.0, 4, 5]}, sides=[[3, 4, 5]])) == [
        "[0]: 3.0 is not an integer (the parameter is one)"
    ]


def test_an_object_matches_key_by_key_each_key_with_its_acceptable_values() -> None:
    # BFCL's dict_checker: possible answers are objects of lists; "" marks an optional key.
    assert one({"options": {"digits": 2}}, options=[{"digits": [2, 3], "mode": ["", "x"]}]).passed
    assert why(one({"options": {"digits": 4}}, options=[{"digits": [2, 3]}])) == [
        ".digits: 4 is none of [2, 3]"
    ]
    assert why(one({"options": {"digits": 2, "x": 1}}, options=[{"digits": [2]}])) == [
        'key "x" is not expected'
    ]
    assert why(one({"options": {}}, options=[{"digits": [2]}])) == ['key "digits" is missing']
    # The $ref is followed: "2.0" for an integer inside an object is still a mismatch.
    assert why(one({"options": {"digits": 2.0}}, options=[{"digits": [2]}])) == [
        ".digits: 2.0 is not an integer (the parameter is one)"
    ]


def test_a_list_of_objects_matches_each_object_in_order() -> None:
    expected = [[{"artist": ["Taylor Swift"]}, {"artist": ["Maroon 5"]}]]
    assert one(
        {"sides": [{"artist": "taylor swift"}, {"artist": "Maroon5"}]}, sides=expected
    ).passed
    assert not one(
        {"sides": [{"artist": "Maroon 5"}, {"artist": "Taylor Swift"}]}, sides=expected
    ).passed


def test_parallel_calls_match_in_any_order() -> None:
    expected = [
        expect("play", artist=["Taylor Swift"], minutes=[20]),
        expect("play", artist=["Maroon 5"], minutes=[15]),
    ]
    answer = calls(
        ("play", {"artist": "Maroon 5", "minutes": 15}),
        ("play", {"artist": "Taylor Swift", "minutes": 20}),
    )
    score = score_turn(expected, answer, SCHEMAS)
    assert score.passed and score.tool_selection
    assert score.expected is not None
    assert [check.call for check in score.expected] == [1, 0]
    ordered = score_turn(expected, answer, SCHEMAS, ordered=True)
    assert not ordered.passed
    assert ordered.tool_selection  # the right tools, in the right order of names


def test_parallel_calls_are_paired_by_a_real_matching_where_bfcl_takes_the_first() -> None:
    """Expected A accepts either call, B only the first: BFCL's checker pairs A with the first
    call, then finds none for B and fails; a matching pairs A with the second."""
    expected = [
        expect("play", artist=["x", "y"], minutes=[1]),
        expect("play", artist=["x"], minutes=[1]),
    ]
    answer = calls(("play", {"artist": "x", "minutes": 1}), ("play", {"artist": "y", "minutes": 1}))
    score = score_turn(expected, answer, SCHEMAS)
    assert score.passed


def test_a_wrong_number_of_calls_fails_and_the_extra_call_is_unexpected() -> None:
    # BFCL: "Wrong number of functions."
    expected = [expect("play", artist=["x"], minutes=[1])]
    answer = calls(("play", {"artist": "x", "minutes": 1}), ("area", {"base": 1}))
    score = score_turn(expected, answer, SCHEMAS)
    assert not score.passed and not score.tool_selection
    assert score.unexpected == [1]
    assert score.expected is not None and score.expected[0].ok  # the call itself was right


def test_a_tool_not_called_is_reported_with_the_call_made_instead() -> None:
    score = score_turn([expect("area", base=[1])], calls(("play", {"artist": "x"})), SCHEMAS)
    assert not score.passed and not score.tool_selection
    assert score.expected is not None
    assert (score.expected[0].call, score.expected[0].why) == (None, "area was not called")
    assert score.unexpected == [0]


def test_irrelevance_passes_without_any_call() -> None:
    assert score_turn([], [], SCHEMAS).passed
    made = score_turn([], calls(("area", {"base": 1})), SCHEMAS)
    assert not made.passed and made.unexpected == [0]


def test_turns_not_scored_keep_their_calls() -> None:
    score = score_turn(None, calls(("area", {"base": 1})), SCHEMAS)
    assert score.passed is None and score.expected is None
    assert score.calls[0].arguments == {"base": 1}


def test_arguments_that_are_not_a_json_object() -> None:
    for raw in ("{not json", "[1, 2]", '"{\\"base\\": 1}"'):
        score = score_turn([expect("area", base=[1])], calls(("area", raw)), SCHEMAS)
        assert not score.passed
        assert score.expected is not None
        assert score.expected[0].why == "its arguments are not a JSON object"
    assert score_turn([expect("area")], calls(("area", "  ")), SCHEMAS).passed  # "" is {}
    kept = score_turn(None, calls(("area", "{not json")), SCHEMAS)
    assert kept.calls[0].arguments == "{not json"  # kept as sent


def test_a_null_is_a_left_out_argument_of_the_tools_rendered_strict_only() -> None:
    answer = calls(("area", {"base": 1, "unit": None}))
    wanted = [expect("area", base=[1], unit=["", "cm"])]
    assert not score_turn(wanted, answer, SCHEMAS).passed
    assert score_turn(wanted, answer, SCHEMAS, null_is_omitted={"area"}).passed
    assert not score_turn(wanted, answer, SCHEMAS, null_is_omitted={"play"}).passed


def test_the_loop_s_refusal_is_kept_beside_the_call() -> None:
    score = score_turn(
        [expect("area", base=[5])],
        calls(("area", {"base": "5"})),
        SCHEMAS,
        refused={"c0": "Invalid arguments for tool `area`: base: Input should be a valid integer"},
    )
    assert score.calls[0].refused is not None and "valid integer" in score.calls[0].refused
    assert not score.passed


def test_a_long_value_is_cut_in_words_but_kept_whole() -> None:
    long = "x" * 1000
    score = one({"unit": long}, unit=["cm"])
    assert score.expected is not None
    argument = score.expected[0].arguments[0]
    assert argument.got == long
    assert argument.why is not None and len(argument.why) < 300
