"""The conformance suite for the CLI axis: every `agentforge-typed` command, each guarantee that
applies to it, against real local servers on 127.0.0.1 that lie, drip, echo the key or never end.

`probe` reads what a server sends: its answers are capped, its requests end within `--timeout`,
its output never shows the key, and a malformed answer ends it with exit status 1 and one line.
`run` reads through a provider, whose caps and deadlines the provider suite checks; here its
output is checked for the key (in errors, and echoed in a successful answer) and for control
characters (what the model and the tools wrote reaches the terminal printable). `schema` and `check` read no server (shown by a test that forbids
the network), so the server-facing guarantees hold for them without anything to check.
"""

from __future__ import annotations

import gzip
import json
import logging
import secrets
import socket
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from compatible_server import CompatibleServer
from conformance import CLI, Surface, assert_registered
from http_server import Reply, Request, ScriptedServer
from hypothesis import given, settings
from hypothesis import strategies as st

from agentforge_typed import ModelError
from agentforge_typed.cli import main
from agentforge_typed.cli._main import _parser
from agentforge_typed.cli._probe import (
    DEFAULT_TIMEOUT,
    MAX_ANSWER_BYTES,
    _checked_deltas,
    _checked_message,
    _Streamed,
)

KEY = "sk-canary-" + secrets.token_hex(16)
"""The fixture key: servers echo it, and no output may hold it or any 12 characters of it."""


PRINTABLE = {
    "probe": "test_a_server_error_is_shown_on_one_printable_line",
    "run": "test_run_shows_what_the_model_and_the_tools_wrote_printable",
    "schema": "test_schema_and_check_show_a_tool_description_printable",
    "check": "test_schema_and_check_show_a_tool_description_printable",
    "conversations": (
        "tests/cli/test_stores_cli.py::test_stored_text_reaches_the_terminal_printable"
    ),
    "mcp": "test_mcp_list_shows_a_tool_description_printable",
    "eval": "tests/evals/test_evals_cli.py::test_eval_shows_what_the_model_wrote_printable",
}
"""Each command's test that what it prints of outside text reaches the terminal printable (in
this module, or `tests/<file>.py::<test>`)."""


def test_covers_every_surface() -> None:
    assert_registered(CLI)
    assert set(PRINTABLE) == set(CLI.names("printable"))
    for test in PRINTABLE.values():
        where, _, name = test.rpartition("::")
        if where:
            assert f"def {name}(" in Path(where).read_text(), test
        else:
            assert callable(globals().get(name)), test


# -- the servers -------------------------------------------------------------------------------

Script = Callable[[Request], Reply]
"""What a server answers one POST with."""

MODEL = CompatibleServer(set(), set())
"""A well-behaved model, for the answers a script does not tamper with."""

STREAM = {"content-type": "text/event-stream"}
JSON_TYPE = {"content-type": "application/json"}


def _sent_key(request: Request) -> str:
    """The key the client sent."""
    return str(request.headers.get("authorization", "")).removeprefix("Bearer ")


def _dripped(data: bytes) -> list[bytes]:
    """`data` a byte a second (until the server closes)."""
    return [data[i : i + 1] for i in range(len(data))]


def well_behaved(request: Request) -> Reply:
    body = request.json()
    if body.get("stream"):
        return Reply.sse(MODEL.chunks(body), done=True)
    return Reply.json(MODEL.completion(body))


@contextmanager
def server(script: Script) -> Iterator[str]:
    """Serve `script` on 127.0.0.1 until the block ends; yields the URL."""
    with ScriptedServer() as served:
        served.route("*", script)
        yield f"{served.url}/v1"


def probe(capsys: pytest.CaptureFixture[str], url: str, *extra: str) -> tuple[int, str, str, float]:
    """`probe` against `url` with the fixture key: status, stdout, stderr and seconds taken."""
    started = time.monotonic()
    status = main(
        ["probe", "--model", "openai:local-model", "--base-url", url, "--no-max-tools", *extra]
    )
    out, err = capsys.readouterr()
    return status, out, err, time.monotonic() - started


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


def run(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    script: Script,
    json_output: bool = False,
) -> tuple[int, str, str]:
    """`run` of the weather example against a server playing `script`: status, stdout, stderr."""
    with server(script) as url:
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        args = ["run", "examples/weather.py:tools", "Paris?", "--model", "openai:gpt-x"]
        status = main([*args, "--json"] if json_output else args)
    out, err = capsys.readouterr()
    return status, out, err


def assert_no_key(*texts: str) -> None:
    for text in texts:
        leaked = [KEY[i : i + 12] for i in range(len(KEY) - 11) if KEY[i : i + 12] in text]
        assert not leaked, f"the key (or part of it: {leaked[0]!r}) shows in {text[:2000]!r}"


def failure_line(err: str) -> str:
    """The one line `probe` ends with when it fails, after its progress lines."""
    assert "Traceback" not in err
    *progress, last = err.splitlines()
    assert all(line.startswith(("probing ", "request ")) for line in progress), progress
    assert last.startswith("agentforge-typed: probe failed: probe ")
    return last


# -- bounded -----------------------------------------------------------------------------------


def _padded(size: int, length: bool) -> Script:
    """The answers without `tool_choice` padded with spaces to exactly `size` bytes, with a
    `content-length` or without; the rest well-behaved."""

    def script(request: Request) -> Reply:
        body = request.json()
        if body.get("tools") and not body.get("tool_choice") and not body.get("stream"):
            data = json.dumps(MODEL.completion(body)).encode()
            padded = data + b" " * (size - len(data))
            return Reply(200, padded if length else [padded], JSON_TYPE)
        return well_behaved(request)

    return script


def _endless(request: Request) -> Reply:
    """Streams that never end: chunks of 1 KiB (a thousand spaces of content) until the server
    stops or 8 MiB were sent."""
    body = request.json()
    if not body.get("stream"):
        return well_behaved(request)
    base = next(MODEL.chunks(body))
    chunk = {**base, "choices": [{"index": 0, "delta": {"content": " " * 1000}}]}
    line = f"data: {json.dumps(chunk)}\n\n".encode()
    return Reply(200, [line] * (8 * 1024 * 1024 // len(line)), STREAM)


@pytest.mark.parametrize("length", [True, False], ids=["content-length", "until-close"])
@pytest.mark.parametrize("over", [0, 1])
def test_probe_reads_at_most_the_cap_of_one_answer(
    capsys: pytest.CaptureFixture[str], over: int, length: bool
) -> None:
    with server(_padded(MAX_ANSWER_BYTES + over, length)) as url:
        status, out, err, _ = probe(capsys, url, "--json")
    if not over:
        assert status == 0, err
        assert json.loads(out)["profile"]["tools"] is True
        return
    assert (status, out) == (1, "")
    assert failure_line(err) == (
        "agentforge-typed: probe failed: probe tools: the answer is longer than "
        f"{MAX_ANSWER_BYTES} bytes, the most the probe reads of one answer"
    )


def test_probe_refuses_a_compressed_answer(capsys: pytest.CaptureFixture[str]) -> None:
    """A gzip bomb: 1 MiB of zeros in about a kilobyte. The cap counts the bytes read, so the
    probe asks for none compressed and refuses one that is."""
    asked: list[str | None] = []

    def script(request: Request) -> Reply:
        asked.append(request.headers.get("accept-encoding"))
        data = gzip.compress(b"0" * MAX_ANSWER_BYTES)
        return Reply(200, data, {**JSON_TYPE, "content-encoding": "gzip"})

    with server(script) as url:
        status, out, err, _ = probe(capsys, url, "--json")
    assert (status, out, asked) == (1, "", ["identity"])
    assert failure_line(err) == (
        "agentforge-typed: probe failed: probe tools: the answer is compressed (gzip), although "
        "the probe asked for no compression"
    )


def test_probe_keeps_nothing_of_an_endless_stream(capsys: pytest.CaptureFixture[str]) -> None:
    tracemalloc.start()
    try:
        with server(_endless) as url:
            status, out, err, _ = probe(capsys, url, "--json")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (status, out) == (1, "")
    assert failure_line(err).startswith(
        "agentforge-typed: probe failed: probe stream with tools: the answer is longer than "
    )
    # The cap's worth of chunks, parsed, would take several times the cap.
    assert peak < 3 * MAX_ANSWER_BYTES, f"{peak} bytes at the peak"


# -- deadlines ---------------------------------------------------------------------------------


def _drip_headers(request: Request) -> Reply:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{}"
    return Reply(body=_dripped(head), delay=1.0, raw=True)


def _drip_body(request: Request) -> Reply:
    data = json.dumps(MODEL.completion(request.json())).encode()
    headers = {**JSON_TYPE, "content-length": str(len(data))}
    return Reply(200, _dripped(data), headers, delay=1.0)


def _drip_stream(request: Request) -> Reply:
    body = request.json()
    if not body.get("stream"):
        return well_behaved(request)
    data = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in MODEL.chunks(body))
    return Reply(200, _dripped(data), STREAM, delay=1.0)


@pytest.mark.parametrize(
    ("script", "request_name"),
    [(_drip_headers, "tools"), (_drip_body, "tools"), (_drip_stream, "stream with tools")],
)
def test_probe_requests_end_within_the_timeout(
    capsys: pytest.CaptureFixture[str], script: Script, request_name: str
) -> None:
    with server(script) as url:
        status, out, err, took = probe(capsys, url, "--json", "--timeout", "1.5")
    assert (status, out) == (1, "")
    assert failure_line(err) == (
        f"agentforge-typed: probe failed: probe {request_name}: no complete answer within 1.5s "
        "(--timeout)"
    )
    # The well-behaved requests before the dripping one take milliseconds.
    assert took < 1.5 + 2.0, took


def test_probe_timeout_default_is_documented_and_shared() -> None:
    parsed = _parser().parse_args(["probe", "--model", "openai:m"])
    assert parsed.timeout == DEFAULT_TIMEOUT == 120.0


# -- secret ------------------------------------------------------------------------------------


def _echo(request: Request) -> Reply:
    """A server that puts the key it was sent wherever it can: tool arguments, text, reasoning,
    stream content, and the error messages of the refusals evidence quotes."""
    key, body = _sent_key(request), request.json()
    refused = (
        body.get("tool_choice") == "required"
        or "stream_options" in body
        or [m["role"] for m in body["messages"]][1:].count("system")
        or len(body.get("tools") or ()) > 1
    )
    if refused:
        error = {"message": f"invalid key {key}: refused", "code": key}
        return Reply.json({"error": error}, 400)
    if body.get("stream"):
        chunks = list(MODEL.chunks(body))
        chunks.insert(1, {**chunks[0], "choices": [{"index": 0, "delta": {"content": key}}]})
        return Reply.sse(chunks, done=True)
    answer = MODEL.completion(body)
    message = answer["choices"][0]["message"]
    message.update(content=key, reasoning_content=key)
    for call in message.get("tool_calls") or ():
        call["function"]["arguments"] = json.dumps({"unit": key, "city": key})
    return Reply.json(answer)


def _fatal_echo(where: str) -> Script:
    def script(request: Request) -> Reply:
        key, body = _sent_key(request), request.json()
        if where == "status":
            return Reply.json({"error": {"message": f"bad key {key}"}}, 401)
        if where == "chunk" and body.get("stream"):
            return Reply(200, [f'data: {{"key": "{key}\n\n'.encode()], STREAM)
        if where == "shape" and not body.get("stream"):
            return Reply.json({"choices": [{"message": key}]})
        return well_behaved(request)

    return script


@pytest.mark.parametrize("form", ["table", "--json"])
def test_probe_output_never_shows_the_key(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, form: str
) -> None:
    caplog.set_level(logging.DEBUG)
    extra = ("--json",) if form == "--json" else ()
    with server(_echo) as url:
        status, out, err, _ = probe(capsys, url, *extra)
    assert status == 0, err
    assert_no_key(out, err, caplog.text)
    # What the server echoed is there, scrubbed: the evidence still says what happened.
    shown = "\n".join(json.loads(out)["evidence"].values()) if extra else out
    assert 'off-schema arguments \'{"unit": "[redacted]"' in shown
    assert "stream_options refused: probe API error 400: invalid key [redacted]: refused" in shown


@pytest.mark.parametrize("where", ["status", "chunk", "shape"])
def test_probe_failures_never_show_the_key(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, where: str
) -> None:
    caplog.set_level(logging.DEBUG)
    with server(_fatal_echo(where)) as url:
        status, out, err, _ = probe(capsys, url, "--json")
    assert (status, out) == (1, "")
    failure_line(err)
    assert_no_key(err, caplog.text)


def _run_echo(where: str) -> Script:
    """A server failing a `run` in one way, echoing the key."""

    def script(request: Request) -> Reply:
        key, body = _sent_key(request), request.json()
        if where == "status":
            return Reply.json({"error": {"message": f"bad key {key}", "code": key}}, 401)
        if where == "error body":
            return Reply.json({"error": {"message": f"bad key {key}"}})
        if where == "malformed":
            if body.get("stream"):
                return Reply(200, [f'data: {{"choices": "{key}\n\n'.encode()], STREAM)
            return Reply(200, f'{{"choices": "{key}'.encode(), JSON_TYPE)
        assert where == "stream error"
        if not body.get("stream"):
            return Reply.json({"error": {"message": f"bad key {key}"}})
        return Reply.sse([{"error": {"message": f"bad key {key}", "code": key}}], done=True)

    return script


@pytest.mark.parametrize("where", ["status", "error body", "stream error", "malformed"])
@pytest.mark.parametrize("json_output", [False, True])
def test_run_output_never_shows_the_key(
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    where: str,
    json_output: bool,
) -> None:
    caplog.set_level(logging.DEBUG)
    status, out, err = run(capsys, monkeypatch, _run_echo(where), json_output)
    assert status == 1
    assert err.startswith("agentforge-typed: ModelError: ")
    assert_no_key(out, err, caplog.text)


def _answering(text: str, arguments: str) -> Script:
    """A well-formed model: first a call of `get_weather` with `arguments` (raw), then the answer
    `text`; a stream sends every text and argument three characters a delta."""

    def script(request: Request) -> Reply:
        body = request.json()
        calls = [] if any(m["role"] == "tool" for m in body["messages"]) else [arguments]
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": None if calls else text}
            if calls:
                function = {"name": "get_weather", "arguments": arguments}
                message["tool_calls"] = [{"id": "c0", "type": "function", "function": function}]
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            return Reply.json({"id": "x", "choices": [choice]})

        def chunk(delta: dict[str, Any]) -> dict[str, Any]:
            return {"id": "x", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}

        def pieces(value: str) -> list[str]:
            return [value[i : i + 3] for i in range(0, len(value), 3)]

        deltas: list[dict[str, Any]]
        if calls:
            head = {"index": 0, "id": "c0", "type": "function"}
            deltas = [{"tool_calls": [{**head, "function": {"name": "get_weather"}}]}]
            deltas += [
                {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}
                for piece in pieces(arguments)
            ]
        else:
            deltas = [{"content": piece} for piece in pieces(text)]
        return Reply.sse([chunk({"role": "assistant"}), *map(chunk, deltas)], done=True)

    return script


@pytest.mark.parametrize("json_output", [False, True])
def test_run_never_shows_a_key_echoed_in_a_successful_answer(
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    json_output: bool,
) -> None:
    """No error boundary sees a successful answer: the model's text (streamed three characters
    at a time), its call's arguments and the tool's result quoting them all hold the key, and
    `run` shows none of it."""
    script = _answering(f"Your key is {KEY}, keep it.", json.dumps({"city": KEY}))
    status, out, err = run(capsys, monkeypatch, script, json_output)
    assert status == 0, err
    assert_no_key(out, err, caplog.text)
    assert "Your key is [redacted], keep it." in (json.loads(out)["text"] if json_output else out)


# -- printable ---------------------------------------------------------------------------------

HOSTILE = "\x1b]0;pwned\x07\x1b[2J\r== final answer: forged\x08\u202e\x9b2J"
"""A terminal title change, a cleared screen, a carriage return that would forge one of the
CLI's own `==` lines over the text before it, a backspace, a right-to-left override, and a C1
control sequence introducer."""


@pytest.mark.parametrize("json_output", [False, True])
def test_run_shows_what_the_model_and_the_tools_wrote_printable(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, json_output: bool
) -> None:
    """The model's text and the call it makes (arguments that are not JSON, quoted back by the
    tool's arguments error) carry control characters: none reaches the terminal (each is a
    space), so no line is overwritten and no line the CLI did not write starts with `==`."""
    script = _answering(f"answer {HOSTILE} end", f"{{{HOSTILE}")
    status, out, err = run(capsys, monkeypatch, script, json_output)
    assert status == 0, err
    for line in out.splitlines():
        assert line.isprintable(), repr(line)
    if json_output:
        assert json.loads(out)["text"] == f"answer {HOSTILE} end"  # escaped, not lost
        return
    assert [line for line in out.splitlines() if line.startswith("==")] == [
        "== final answer: the text streamed above",
        out.splitlines()[-1],
    ]
    assert "answer  ]0;pwned  [2J == final answer: forged   2J end" in out


def test_schema_and_check_show_a_tool_description_printable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A target's tools may be an MCP server's, their descriptions its words: `schema` escapes
    what a terminal would act on, and reads back the same; `check` prints printable lines."""
    target = "tests/fixtures/cli_targets.py:hostile"
    assert main(["schema", target]) == 0
    out = capsys.readouterr().out
    assert all(line.isprintable() for line in out.splitlines())
    (declared,) = json.loads(out)
    assert declared["function"]["description"].startswith("Greets.\x1b]0;pwned\x07")
    main(["check", target])
    assert all(line.isprintable() for line in capsys.readouterr().out.splitlines())


def test_mcp_list_shows_a_tool_description_printable(capsys: pytest.CaptureFixture[str]) -> None:
    """`mcp --list` prints the declarations as JSON whose strings escape what a terminal would
    act on, and reads back the same."""
    assert main(["mcp", "tests/fixtures/cli_targets.py:hostile", "--list"]) == 0
    out = capsys.readouterr().out
    assert all(line.isprintable() for line in out.splitlines())
    (declared,) = json.loads(out)
    assert declared["description"].startswith("Greets.\x1b]0;pwned\x07")


# -- malformed answers -------------------------------------------------------------------------


def _message_with(**fields: Any) -> Script:
    """Every answer's first choice's message given `fields`."""

    def script(request: Request) -> Reply:
        body = request.json()
        if body.get("stream"):
            return well_behaved(request)
        answer = MODEL.completion(body)
        answer["choices"][0]["message"].update(fields)
        return Reply.json(answer)

    return script


def _answer(payload: Any) -> Script:
    return lambda request: Reply.json(payload)


def _chunk_with(delta: Any = None, chunk: Any = None) -> Script:
    """Streams whose first tool-call chunk is replaced: its delta by `delta`, or whole by
    `chunk`."""

    def script(request: Request) -> Reply:
        body = request.json()
        if not body.get("stream"):
            return well_behaved(request)
        chunks = list(MODEL.chunks(body))
        if chunk is not None:
            chunks[1] = chunk
        else:
            chunks[1]["choices"][0]["delta"] = delta
        return Reply.sse(chunks, done=True)

    return script


MALFORMED: list[tuple[Script, str]] = [
    (_chunk_with({"tool_calls": 5}), "chunk 2: choices[0].delta.tool_calls is a number"),
    (_chunk_with({"tool_calls": [7]}), "chunk 2: choices[0].delta.tool_calls[0] is a number"),
    (_chunk_with({"tool_calls": {"index": 0}}), "tool_calls is an object, not an array"),
    (_chunk_with("text"), "chunk 2: choices[0].delta is a string, not an object"),
    (_chunk_with(chunk=5), "chunk 2 is a number, not an object"),
    (_chunk_with(chunk={"choices": "x"}), "chunk 2.choices is a string, not an array"),
    (_chunk_with(chunk={"choices": [None]}), "chunk 2: choices[0] is null, not an object"),
    (_answer([]), "the answer is an array, not an object"),
    (_answer("ok"), "the answer is a string, not an object"),
    (_answer({"choices": {"0": {}}}), "the answer.choices is an object, not an array"),
    (_answer({"choices": [7]}), "choices[0] is a number, not an object"),
    (_answer({"choices": [{"message": []}]}), "choices[0].message is an array, not an object"),
    (_answer({"choices": [{}]}), "no choices[0].message"),
    (_message_with(tool_calls=5), "message.tool_calls is a number, not an array"),
    (_message_with(tool_calls=[True]), "message.tool_calls[0] is a boolean, not an object"),
    (_message_with(tool_calls=[{"function": "f"}]), "function is a string, not an object"),
]


@pytest.mark.parametrize(("script", "expected"), MALFORMED)
def test_probe_stops_on_a_malformed_answer_with_one_line(
    capsys: pytest.CaptureFixture[str], script: Script, expected: str
) -> None:
    with server(script) as url:
        status, out, err, _ = probe(capsys, url, "--json")
    assert (status, out) == (1, "")
    assert expected in failure_line(err)
    assert ": unexpected answer: " in err


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
SHAPED = st.fixed_dictionaries(
    {},
    optional={
        "choices": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "message": st.fixed_dictionaries(
                        {}, optional={"tool_calls": JSON, "reasoning": JSON}
                    )
                    | JSON,
                    "delta": st.fixed_dictionaries({}, optional={"tool_calls": JSON}) | JSON,
                },
            )
            | JSON,
            max_size=2,
        )
        | JSON,
        "usage": JSON,
    },
)
"""Answers and chunks shaped like OpenAI's, with any JSON at every level."""


@settings(max_examples=300, deadline=None)
@given(SHAPED | JSON)
def test_probe_reads_any_json_or_says_why_not(answer: Any) -> None:
    """Whatever JSON a server sends, the probe reads it or raises `ModelError` saying why."""

    def stream() -> None:
        seen = _Streamed()
        for delta in _checked_deltas("x", 1, answer):
            seen.take(delta)

    for read in (lambda: _checked_message("x", answer), stream):
        try:
            read()
        except ModelError as error:
            assert error.message.startswith("probe x: unexpected answer: ")


def test_run_stops_on_a_malformed_answer_with_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # `run` streams; `run --json` makes blocking calls.
    for script, json_output in (
        (_chunk_with({"tool_calls": 5}), ()),
        (_chunk_with(chunk={"choices": [None]}), ()),
        (_message_with(tool_calls=5), ("--json",)),
        (_answer({"choices": [{"message": 5}]}), ("--json",)),
        (_answer({"choices": [{"message": 5}]}), ()),
    ):
        with server(script) as url:
            monkeypatch.setenv("OPENAI_BASE_URL", url)
            args = ["run", "examples/weather.py:tools", "Paris?", "--model", "openai:m"]
            status = main([*args, *json_output])
        out, err = capsys.readouterr()
        assert status == 1, (out, err)
        assert err.startswith("agentforge-typed: ModelError: ")
        assert err.count("\n") == 1, err


def _forging(request: Request) -> Reply:
    """An error message that would print a forged line and clear the terminal."""
    message = "denied\nagentforge-typed: all good\x1b[2J\r"
    return Reply.json({"error": {"message": message}}, 401)


@pytest.mark.parametrize("command", ["probe", "run"])
def test_a_server_error_is_shown_on_one_printable_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    with server(_forging) as url:
        if command == "probe":
            status, _, err, _ = probe(capsys, url)
            last = failure_line(err)
        else:
            monkeypatch.setenv("OPENAI_BASE_URL", url)
            status = main(["run", "examples/weather.py:tools", "hi", "--model", "openai:m"])
            err = capsys.readouterr().err
            (last,) = err.splitlines()
    assert status == 1
    assert last.endswith("API error 401: denied agentforge-typed: all good [2J")


# -- commands that read no server --------------------------------------------------------------


OFFLINE = [
    pytest.param(command, id=command.name)
    for command in CLI.surfaces.values()
    if command.traits.get("offline")
]
"""The commands that read no server, each with the arguments it is checked with."""


@pytest.mark.parametrize("command", OFFLINE)
def test_a_command_that_reads_no_server_makes_no_network_request(
    monkeypatch: pytest.MonkeyPatch, command: Surface[Any]
) -> None:
    """`schema` and `check` read only the module they are given: with every connection refused,
    they work as ever, so no server's answer can reach them, and no key."""
    attempts: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(args)
        raise OSError("the network is off in this test")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    for argv in command["offline"]:
        assert main(argv) == 0, argv
    assert attempts == []


# -- every command that reads a server -----------------------------------------------------------


def _command(
    command: Surface[Any],
    url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    *extra: str,
) -> tuple[int, str, str, float]:
    """`command` against the server at `url` (also `OPENAI_BASE_URL`): status, stdout, stderr
    and seconds taken."""
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    started = time.monotonic()
    status = main([*command.build(url), *extra])
    out, err = capsys.readouterr()
    return status, out, err, time.monotonic() - started


def _one_line_failure(status: int, err: str) -> None:
    """Exit status 1, no traceback, and the failure said on the last line (after progress)."""
    assert status == 1 and "Traceback" not in err, err
    assert err.splitlines()[-1].startswith("agentforge-typed: "), err


@pytest.mark.parametrize("json_output", [False, True])
@pytest.mark.parametrize("command", CLI.each("secret"))
def test_no_command_shows_the_key_a_server_echoes(
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    command: Surface[Any],
    json_output: bool,
) -> None:
    caplog.set_level(logging.DEBUG)
    extra = ("--json",) if json_output else ()
    for where in ("status", "chunk", "shape"):
        with server(_fatal_echo(where)) as url:
            status, out, err, _ = _command(command, url, capsys, monkeypatch, *extra)
        assert status in (0, 1) and "Traceback" not in err, err
        assert_no_key(out, err, caplog.text)


@pytest.mark.parametrize("command", CLI.each("malformed"))
def test_every_command_stops_on_a_malformed_answer_with_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: Surface[Any]
) -> None:
    def malformed(request: Request) -> Reply:
        """Every answer malformed: a stream's first tool-call chunk, a whole answer's calls."""
        stream = request.json().get("stream")
        script = _chunk_with({"tool_calls": 5}) if stream else _message_with(tool_calls=5)
        return script(request)

    for script in (_answer({"choices": [{"message": 5}]}), malformed):
        for extra in ((), ("--json",)):
            with server(script) as url:
                status, _, err, _ = _command(command, url, capsys, monkeypatch, *extra)
            _one_line_failure(status, err)


@pytest.mark.parametrize("command", CLI.each("bounded"))
def test_every_command_reads_an_endless_stream_only_to_a_cap(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: Surface[Any]
) -> None:
    """8 MiB of stream, sent as fast as it is read: the command stops early, and keeps little."""
    tracemalloc.start()
    try:
        with server(_endless) as url:
            status, _, err, _ = _command(command, url, capsys, monkeypatch, "--json")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    _one_line_failure(status, err)
    assert peak < 4 << 20, f"{peak} bytes at the peak"


@pytest.mark.parametrize("command", CLI.each("deadline"))
def test_every_command_ends_within_its_timeout_against_a_dripping_server(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: Surface[Any]
) -> None:
    with server(_drip_headers) as url:
        status, _, err, took = _command(
            command, url, capsys, monkeypatch, "--json", command["timeout"], "1.5"
        )
    _one_line_failure(status, err)
    assert took < 1.5 + 2.0, took
