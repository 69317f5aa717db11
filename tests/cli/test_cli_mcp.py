"""`agentforge-typed mcp`: what it lists, what it refuses before serving (exit status 2, one
line), and the warning for a server anyone may reach."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from serving_support import ROOT, cli_env

from agentforge_typed.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["mcp", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_list_prints_what_tools_list_declares(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, "examples/weather.py:tools", "--list")
    assert status == 0 and err == ""
    declared = json.loads(out)
    assert [tool["name"] for tool in declared] == ["get_weather", "get_forecast"]
    weather = declared[0]
    assert weather["inputSchema"]["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert weather["outputSchema"]["properties"]["temperature"]["type"] == "number"
    # A list is wrapped: structured content is an object.
    assert declared[1]["outputSchema"]["required"] == ["result"]


def test_tools_and_groups_select_what_is_served(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "examples/weather.py:tools", "--list", "--tools", "get_forecast")
    assert status == 0 and [tool["name"] for tool in json.loads(out)] == ["get_forecast"]
    status, _, err = run(capsys, "examples/weather.py:tools", "--list", "--tools", "nope")
    assert status == 2 and err.startswith("agentforge-typed: error: --tools: no registered tool")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["tests/fixtures/serving_targets.py:tools", "--list"],
            "whoami (ToolContext[Session]), chatty (ToolContext[Session]), total "
            "(ToolContext[Session]), measure (ToolContext[Session]), nap (ToolContext[Session]) "
            "need deps, and none are given: pass --deps module:factory, or define `deps` in "
            "TARGET's module",
        ),
        (
            ["tests/fixtures/serving_targets.py:tools", "--deps", "nowhere", "--list"],
            "--deps: 'serving_targets' has no attribute 'nowhere'",
        ),
        (
            ["examples/weather.py:tools", "--token-env", "SOME_TOKEN"],
            "--token-env applies to --http only (over stdio, the client is the process that "
            "started the server)",
        ),
        (
            ["examples/weather.py:tools", "--http", "--token-env", "AGENTFORGE_UNSET_TOKEN"],
            "--token-env: the environment variable AGENTFORGE_UNSET_TOKEN is not set",
        ),
    ],
    ids=["missing-deps", "unknown-deps", "token-without-http", "token-unset"],
)
def test_what_cannot_be_served_is_refused_before_serving(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    status, out, err = run(capsys, *argv)
    assert status == 2 and out == ""
    assert err.splitlines() == [f"agentforge-typed: error: {message}"], err


def test_deps_name_a_factory_called_per_session(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(
        capsys, "tests/fixtures/serving_targets.py:tools", "--deps", "new_session", "--list"
    )
    assert status == 0 and "whoami" in out


def test_bound_beyond_the_loopback_without_a_token_it_warns() -> None:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentforge_typed",
            "mcp",
            "examples/weather.py:tools",
            "--http",
            "--host",
            "0.0.0.0",
            "--port",
            "0",
        ],
        cwd=ROOT,
        env=cli_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    try:
        lines = [process.stderr.readline() for _ in range(2)]
    finally:
        process.terminate()
        process.wait(timeout=10)
        process.stderr.close()
    assert lines[0].startswith("agentforge-typed: WARNING: serving on 0.0.0.0 without a token")
    assert "serving 2 tools at http://0.0.0.0:" in lines[1]


def test_stdio_refuses_a_file_for_stdin(tmp_path: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_text("{}\n")
    with requests.open() as stdin:
        done = subprocess.run(
            [sys.executable, "-m", "agentforge_typed", "mcp", "examples/weather.py:tools"],
            cwd=ROOT,
            env=cli_env(),
            stdin=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("agentforge-typed: error: stdin is a file")
