"""`agentforge-typed eval`: its exit statuses, outputs, progress bar, BFCL files, Ctrl-C (a real
subprocess and SIGINT), and what it shows of a model's words (printable, without the key)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from http_server import Reply, Request, ScriptedServer

from agentforge_typed.cli import main
from agentforge_typed.cli._eval import Progress
from agentforge_typed.evals import EvalReport

ROOT = Path(__file__).resolve().parents[2]
CASES = "tests/fixtures/evals/weather.jsonl"
TARGET = "examples/weather.py:tools"
BFCL = "tests/fixtures/evals/bfcl"
KEY = "sk-evalcanary-0123456789abcdef0123"
HOSTILE = "\x1b]0;pwned\x07\x1b[2J\r== forged\x08\u202e"

Answer = Callable[[dict[str, Any]], dict[str, Any]]
"""The assistant message for a request body."""


def by_prompt(calls: dict[str, list[tuple[str, dict[str, Any]]]]) -> Answer:
    """Answer a first turn with the calls its prompt's first word selects; after results, text."""

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        last = body["messages"][-1]
        if last["role"] == "tool":
            return {"role": "assistant", "content": "done"}
        made = calls.get(str(last["content"]).split()[0], [])
        if not made:
            return {"role": "assistant", "content": "no call"}
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"c{i}",
                    "type": "function",
                    "function": {"name": n, "arguments": json.dumps(a)},
                }
                for i, (n, a) in enumerate(made)
            ],
        }

    return answer


RIGHT = by_prompt(
    {
        "What's": [("get_weather", {"city": "Paris", "unit": "fahrenheit"})],
        "The": [("get_forecast", {"city": "Oslo", "days": 5})],
        "Weather": [("get_forecast", {"city": "Rome"}), ("get_weather", {"city": "rome"})],
    }
)


@contextmanager
def serving(
    answer: Answer, hold: Callable[[dict[str, Any]], bool] = lambda b: False
) -> Iterator[ScriptedServer]:
    """An OpenAI-compatible server on 127.0.0.1 answering with `answer`; a request `hold` picks
    waits until the server closes."""
    with ScriptedServer() as server:

        def reply(request: Request) -> Reply:
            body = request.json()
            if hold(body):
                server.closing.wait(20)
            message = answer(body)
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            usage = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
            return Reply.json(
                {
                    "id": "x",
                    "object": "chat.completion",
                    "created": 1,
                    "model": "m",
                    "choices": [choice],
                    "usage": usage,
                }
            )

        server.route("/v1/chat/completions", reply)
        yield server


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


def run(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    *args: str,
    answer: Answer = RIGHT,
) -> tuple[int, str, str, list[Any]]:
    with serving(answer) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        status = main(["eval", *args])
    out, err = capsys.readouterr()
    return status, out, err, [request.json() for request in server.requests]


def test_a_passing_eval_prints_its_table_and_writes_both_reports(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    json_path, html_path = tmp_path / "r.json", tmp_path / "r.html"
    status, out, err, _ = run(
        capsys,
        monkeypatch,
        CASES,
        "--target",
        TARGET,
        "--model",
        "openai:m",
        "--repeat",
        "2",
        "--json",
        str(json_path),
        "--html",
        str(html_path),
        "--min-score",
        "1",
    )
    assert status == 0, err
    assert err == ""  # no progress bar: stderr is not a terminal
    lines = out.splitlines()
    assert lines[0].split() == [
        "case",
        "passed",
        "tools",
        "args",
        "rounds",
        "ms",
        "tokens",
        "what",
        "went",
        "wrong",
    ]
    assert [line.split()[:2] for line in lines[1:5]] == [
        ["weather-1", "2/2"],
        ["forecast-1", "2/2"],
        ["both-1", "2/2"],
        ["chat-1", "2/2"],
    ]
    assert "== 4 cases, 8 attempts: score 100.00% (8/8 passed), pass^1 1.00, pass^2 1.00" in out
    report = EvalReport.load(json_path)
    assert report.passed and report.model == "openai:m" and report.repeat == 2
    assert report.summary.tokens.total == 12 * sum(
        a.rounds for c in report.cases for a in c.attempts
    )
    assert '<svg xmlns="http://www.w3.org/2000/svg" id="tool-accuracy"' in html_path.read_text()


def test_json_alone_goes_to_stdout_and_the_table_to_stderr(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    status, out, err, _ = run(
        capsys, monkeypatch, CASES, "--target", TARGET, "--model", "openai:m", "--json"
    )
    assert status == 0
    assert json.loads(out)["summary"]["score"] == 1.0
    assert err.startswith("case ")


def test_a_score_under_the_minimum_is_exit_status_1(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    status, _, err, _ = run(capsys, monkeypatch, CASES, "--target", TARGET, "--min-score", "0.9")
    assert status == 1  # the fake model calls every tool: no case passes
    assert err.splitlines()[-1] == "agentforge-typed: the score 0.0000 is under --min-score 0.9"


def test_a_regression_against_an_earlier_run_is_exit_status_1(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    earlier = tmp_path / "earlier.json"
    assert (
        run(
            capsys,
            monkeypatch,
            CASES,
            "--target",
            TARGET,
            "--model",
            "openai:m",
            "--json",
            str(earlier),
        )[0]
        == 0
    )
    worse = by_prompt({"What's": [("get_weather", {"city": "Lyon", "unit": "fahrenheit"})]})
    status, out, err, _ = run(
        capsys,
        monkeypatch,
        CASES,
        "--target",
        TARGET,
        "--model",
        "openai:m",
        "--compare",
        str(earlier),
        answer=worse,
    )
    assert status == 1
    assert "== compared with" in out and "regression  weather-1  1/1 -> 0/1" in out
    assert err.splitlines()[-1] == (
        "agentforge-typed: 3 regressions against --compare: weather-1, forecast-1, both-1"
    )


def test_an_attempt_that_measured_nothing_is_exit_status_1(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(body: dict[str, Any]) -> dict[str, Any]:
        return {"role": "assistant", "content": None, "tool_calls": 5}  # malformed

    status, _, err, _ = run(
        capsys, monkeypatch, CASES, "--target", TARGET, "--model", "openai:m", answer=failing
    )
    assert status == 1
    assert err.splitlines()[-1].startswith(
        "agentforge-typed: 4 of 4 attempts measured nothing (first: model error: ModelError: "
    )


@pytest.mark.parametrize(
    ("lines", "args", "message"),
    [
        (
            ['{"id": "a", "input": "x"}', '{"id": "b"}'],
            (),
            "cases.jsonl:2: input: required, and missing",
        ),
        (
            ['{"id": "a", "input": "x", "expected_calls": [{"name": "get_wether"}]}'],
            (),
            "case a: expects a call of 'get_wether', which is not a tool of the target; its tools: "
            "get_weather, get_forecast",
        ),
        (
            ['{"id": "a", "input": "x", "tags": ["t"]}'],
            ("--tag", "other"),
            "no case has the tag 'other'",
        ),
        (
            ['{"id": "a", "input": "x"}'],
            ("--compare", "absent.json"),
            "--compare: absent.json: cannot be read",
        ),
        (['{"id": "a", "input": "x"}'], ("--json", "no/such/dir/r.json"), "--json: no such folder"),
        (
            ['{"id": "a", "input": "x"}'],
            ("--bfcl",),
            "--target and --bfcl: a BFCL file brings its own tools",
        ),
    ],
)
def test_a_usage_error_is_exit_status_2_before_any_model_call(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    lines: list[str],
    args: tuple[str, ...],
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cases.jsonl").write_text("\n".join(lines) + "\n")
    target = str(ROOT / TARGET.split(":")[0]) + ":tools"
    status, _, err, requests = run(
        capsys, monkeypatch, "cases.jsonl", "--target", target, "--model", "openai:m", *args
    )
    assert (status, requests) == (2, [])
    assert err.startswith("agentforge-typed: error: "), err
    assert message in err


def test_without_a_target_is_exit_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", CASES]) == 2
    assert "--target is required" in capsys.readouterr().err


def test_a_dialect_that_cannot_render_a_tool_is_exit_status_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "cases.jsonl").write_text('{"id": "a", "input": "x"}\n')
    status = main(
        [
            "eval",
            str(tmp_path / "cases.jsonl"),
            "--target",
            "tests/fixtures/evals/targets.py:recursive",
            "--dialect",
            "gemini",
        ]
    )
    err = capsys.readouterr().err
    assert status == 1, err
    assert "the gemini dialect cannot render" in err.splitlines()[-1]


def test_bfcl_files_run_from_the_command_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    answer = by_prompt({"Find": [("calculate_triangle_area", {"base": 10, "height": 5})]})
    path = tmp_path / "r.json"
    status, out, err, _ = run(
        capsys,
        monkeypatch,
        f"{BFCL}/BFCL_v4_simple_python.json",
        "--bfcl",
        "--model",
        "openai:m",
        "--json",
        str(path),
        answer=answer,
    )
    assert status == 0, err
    cases = {c.id: c.passed for c in EvalReport.load(path).cases}
    assert cases == {"simple_python_0": True, "simple_python_1": False}
    multi = by_prompt({"Add": [("add_note", {"title": "todo", "text": "buy milk"})]})
    status, out, err, _ = run(
        capsys,
        monkeypatch,
        f"{BFCL}/BFCL_v4_multi_turn_miss_func.json",
        "--bfcl",
        "--bfcl-backends",
        "tests/fixtures/evals/bfcl_backends.py:BACKENDS",
        "--model",
        "openai:m",
        answer=multi,
    )
    assert status == 0, err
    assert "multi_turn_miss_func_0" in out
    assert run(capsys, monkeypatch, f"{BFCL}/BFCL_v4_multi_turn_miss_func.json", "--bfcl")[0] == 2


def test_the_progress_bar_shows_only_on_a_terminal() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    shown, hidden = Terminal(), io.StringIO()
    for out in (shown, hidden):
        progress = Progress(out, 4)
        progress.advance(True)
        progress.advance(False)
        progress.clear()
    assert hidden.getvalue() == ""
    text = shown.getvalue()
    assert "\r[###############---------------] 2/4 attempts, 1 failed, 00:00" in text
    assert text.endswith("\r")


def test_the_progress_bar_draws_on_a_real_terminal(tmp_path: Path) -> None:
    import pty

    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "agentforge_typed", "eval", CASES, "--target", TARGET],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=follower,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        seen += chunk
    process.wait(60)
    os.close(leader)
    assert b"\r[#######" in seen and b"4/4 attempts" in seen


def test_ctrl_c_writes_what_finished(tmp_path: Path) -> None:
    """A real process, a real SIGINT: one case answered, the others held by the server; the
    report holds the finished case, lists the others, and the exit status is 130."""
    cases = tmp_path / "cases.jsonl"
    cases.write_text(
        "\n".join(
            json.dumps({"id": f"c{i}", "input": f"case {i}", "expected_calls": []})
            for i in range(4)
        )
        + "\n"
    )
    out = tmp_path / "out.json"
    html = tmp_path / "out.html"
    with serving(
        lambda body: {"role": "assistant", "content": "hi"},
        hold=lambda b: "case 0" not in json.dumps(b),
    ) as server:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agentforge_typed",
                "eval",
                str(cases),
                "--target",
                TARGET,
                "--model",
                "openai:m",
                "--concurrency",
                "1",
                "--json",
                str(out),
                "--html",
                str(html),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={
                **os.environ,
                "PYTHONPATH": str(ROOT),
                "OPENAI_BASE_URL": f"{server.url}/v1",
                "OPENAI_API_KEY": KEY,
            },
        )
        deadline = time.monotonic() + 30
        while len(server.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        try:
            assert len(server.requests) == 2, "the second case never reached the server"
            process.send_signal(signal.SIGINT)
            stdout, stderr = process.communicate(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
    assert process.returncode == 130, stderr
    report = EvalReport.load(out)
    assert report.interrupted and [c.id for c in report.cases] == ["c0"]
    assert report.unfinished == ["c1", "c2", "c3"]
    assert "interrupted" in html.read_text()
    assert stderr.decode().splitlines()[-1] == (
        f"agentforge-typed: interrupted: 1 of 4 cases finished; written to {out}, {html}"
    )
    assert stdout.decode().startswith("case ")


def test_eval_shows_what_the_model_wrote_printable(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The model's arguments carry control characters and the key; the table shows them as
    spaces, and neither the table, the JSON nor the page holds the key."""
    hostile = by_prompt({"What's": [("get_weather", {"city": f"{HOSTILE} {KEY}", "unit": KEY})]})
    json_path, html_path = tmp_path / "r.json", tmp_path / "r.html"
    status, out, err, _ = run(
        capsys,
        monkeypatch,
        CASES,
        "--target",
        TARGET,
        "--model",
        "openai:m",
        "--json",
        str(json_path),
        "--html",
        str(html_path),
        answer=hostile,
    )
    assert status == 0, err
    for line in (out + err).splitlines():
        assert line.isprintable(), repr(line)
    assert not [line for line in out.splitlines() if line.startswith("== forged")]
    for text in (out, err, json_path.read_text(), html_path.read_text()):
        assert KEY not in text and KEY[:16] not in text
    assert "[redacted]" in json_path.read_text()


def test_tools_that_need_deps_without_any_are_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "cases.jsonl").write_text('{"id": "a", "input": "x"}\n')
    cases = str(tmp_path / "cases.jsonl")
    assert main(["eval", cases, "--target", "tests/fixtures/deps_targets.py:needy"]) == 2
    assert "whoami (ToolContext[Account]) needs deps, and none are given" in capsys.readouterr().err
    given = ["--target", "tests/fixtures/deps_targets.py:needy", "--deps", "account"]
    assert main(["eval", cases, *given]) == 0
