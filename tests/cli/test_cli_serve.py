"""`agentforge-typed serve TARGET --model MODEL`: the chat page and both protocols served by
uvicorn, on the loopback unless told otherwise, and each wrong invocation one line with exit
status 2."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agentforge_typed.cli._main import main

ROOT = Path(__file__).parents[2]
WEATHER = "examples/weather.py:tools"


def env(**extra: str) -> dict[str, str]:
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(ROOT), environment.get("PYTHONPATH")])
    )
    return {**environment, **extra}


@contextlib.contextmanager
def serving(*args: str, **extra: str) -> Iterator[tuple[str, list[str]]]:
    """`agentforge-typed serve ARGS --port 0` in a subprocess: its URL and its stderr lines so
    far; interrupted (Ctrl-C) at the end, which must end it with status 130."""
    process = subprocess.Popen(
        [sys.executable, "-m", "agentforge_typed", "serve", *args, "--port", "0"],
        cwd=ROOT,
        env=env(**extra),
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = process.stderr.readline()
            if not line:
                break
            lines.append(line.rstrip("\n"))
            if " at http://" in line:
                break
        assert lines and " at http://" in lines[-1], lines
        yield lines[-1].rsplit(" at ", 1)[1], lines
    finally:
        process.send_signal(signal.SIGINT)
        try:
            status = process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
        process.stderr.close()
    assert status == 130, status


@pytest.mark.slow
def test_serve_serves_the_page_and_both_protocols() -> None:
    with serving(WEATHER, "--model", "fake", "--title", "Weather") as (url, lines):
        assert lines[-1] == f"agentforge-typed: serving 2 tools at {url}"
        assert url.startswith("http://127.0.0.1:") and url.endswith("/")
        page = httpx.get(url)
        assert page.status_code == 200 and "<title>Weather</title>" in page.text
        body = {
            "threadId": "cli-thread",
            "runId": "r1",
            "messages": [{"id": "u1", "role": "user", "content": "weather in Paris?"}],
        }
        answer = httpx.post(url + "ag-ui", json=body, timeout=30)
        frames = [
            json.loads(line[6:]) for line in answer.text.split("\n") if line.startswith("data: ")
        ]
        assert frames[0]["type"] == "RUN_STARTED" and frames[-1]["type"] == "RUN_FINISHED"
        assert {f["toolCallName"] for f in frames if f["type"] == "TOOL_CALL_START"} == {
            "get_weather",
            "get_forecast",
        }
        chat = {
            "id": "c",
            "messages": [{"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"}]}],
        }
        stream = httpx.post(url + "api/chat", json=chat, timeout=30)
        assert stream.headers["x-vercel-ai-ui-message-stream"] == "v1"
        assert stream.text.endswith("data: [DONE]\n\n")


@pytest.mark.slow
def test_serve_warns_when_bound_beyond_the_loopback_without_a_token() -> None:
    with serving(WEATHER, "--model", "fake", "--host", "0.0.0.0") as (url, lines):
        warning = "serving on 0.0.0.0 without a token: anyone who can reach this address"
        assert any(warning in line for line in lines), lines
    with serving(
        WEATHER, "--model", "fake", "--token-env", "UI_TOKEN", UI_TOKEN="s3cret-token"
    ) as (url, lines):
        assert not any("without a token" in line for line in lines)
        body = {
            "threadId": "t",
            "runId": "r",
            "messages": [{"id": "u", "role": "user", "content": "hi"}],
        }
        assert httpx.post(url + "ag-ui", json=body).status_code == 401
        good = {"authorization": "Bearer s3cret-token"}
        assert httpx.post(url + "ag-ui", json=body, headers=good, timeout=30).status_code == 200
        assert all("s3cret-token" not in line for line in lines)


@pytest.mark.parametrize(
    ("argv", "environment", "words"),
    [
        (["--token-env", "UI_NO_SUCH_VAR"], {}, "--token-env: the environment variable"),
        (["--secret-env", "UI_SHORT"], {"UI_SHORT": "short"}, "secret must be at least 16 bytes"),
        (["--store", "nosuch://x"], {}, "--store:"),
        (["--model", "nosuch:model"], {}, "nosuch"),
    ],
)
def test_a_wrong_invocation_is_one_line_and_status_2(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    environment: dict[str, str],
    words: str,
) -> None:
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    model = [] if "--model" in argv else ["--model", "fake"]
    status = main(["serve", WEATHER, *model, *argv])
    err = capsys.readouterr().err
    assert status == 2, err
    assert len(err.strip().splitlines()) == 1 and words in err, err


def test_a_store_needs_a_target_without_its_own_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = main(
        ["serve", "tests/fixtures/cli_targets.py:service", "--model", "fake", "--store", "memory:"]
    )
    err = capsys.readouterr().err
    assert status == 2
    assert "--store: TARGET is a ToolService, which brings its own options" in err


def test_help_names_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    shown = capsys.readouterr().out
    for option in ("--model", "--host", "--port", "--store", "--token-env", "--secret-env"):
        assert option in shown
