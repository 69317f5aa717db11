"""`agentforge-typed run --tools/--group`: the run offers (and FakeModel calls) only the selection."""

from __future__ import annotations

import json

import pytest
from test_cli import cli

GROUPED = "tests/fixtures/grouped_tools.py:service"


def called(*options: str) -> list[str]:
    done = cli("run", GROUPED, "hi", "--json", *options)
    assert done.returncode == 0, done.stderr
    return [e["call"]["name"] for e in json.loads(done.stdout)["tool_executions"]]


def test_no_selection_offers_every_tool() -> None:
    assert called() == ["get_weather", "charge", "refund"]


def test_tools_and_groups_select() -> None:
    assert called("--tools", "refund") == ["refund"]
    assert called("--tools", "refund, get_weather") == ["get_weather", "refund"]
    assert called("--group", "billing") == ["charge", "refund"]
    assert called("--group", "billing", "--tools", "get_weather") == [
        "get_weather",
        "charge",
        "refund",
    ]


def test_live_display_runs_only_the_selection() -> None:
    done = cli("run", GROUPED, "hi", "--tools", "charge")
    assert done.returncode == 0, done.stderr
    assert [line for line in done.stdout.splitlines() if line.startswith("->")] == [
        '-> charge {"customer": "example", "cents": 1}'
    ]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            ("--tools", "get_wether"),
            "--tools: no registered tool named 'get_wether'; tools: get_weather, charge, refund",
        ),
        (("--group", "biling"), "--group: no tool group named 'biling'; groups: ['billing']"),
    ],
)
def test_a_selection_naming_nothing_is_a_usage_error(
    options: tuple[str, ...], message: str
) -> None:
    done = cli("run", GROUPED, "hi", *options)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == f"agentforge-typed: error: {message}\n"
