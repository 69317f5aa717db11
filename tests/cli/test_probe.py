"""`agentforge-typed probe`: against real local servers that each mimic one documented quirk, the
probe reports it; the profile it writes makes the same server work through the degradation rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from compatible_server import compatible_server

from agentforge_typed import (
    ChatRequest,
    ChatRequestParameters,
    ModelError,
    ModelProfile,
    ResponseComplete,
    ToolChoice,
    ToolSpecification,
    UserMessage,
)
from agentforge_typed.cli import main
from agentforge_typed.cli._probe import MAX_TOOLS_REQUESTS, Probe, max_requests
from agentforge_typed.providers.openai import OpenAIChatModel

DEFAULTS: dict[str, Any] = {
    "tools": True,
    "tool_choice": ["auto", "named", "none", "required"],
    "parallel_tool_calls_parameter": True,
    "parallel_tool_calls": True,
    "stream_tool_deltas": True,
    "stream_tool_index": True,
    "strict_schema": True,
    "refused_schema_keywords": [],
    "reasoning_field": None,
    "stream_usage": True,
    "system_message": "any",
    "max_tools": None,
    "user_content": ["audio", "document", "file", "image"],
}
PLAN = (
    "at most 32 requests: 14, up to 7 more if a schema keyword is refused, up to 11 more "
    "measuring max_tools (1024 tiny tools first); max_tokens=200 or less each"
)


def run_probe(capsys: pytest.CaptureFixture[str], url: str, *extra: str) -> tuple[int, str, str]:
    status = main(["probe", "--model", "openai:local-model", "--base-url", url, *extra])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _strict(body: dict[str, Any]) -> bool:
    return any(tool["function"].get("strict") for tool in body.get("tools", ()))


@pytest.mark.parametrize(
    ("quirks", "expected"),
    [
        ((), {}),
        (("reject_required",), {"tool_choice": ["auto", "named", "none"]}),
        (("ignore_required",), {"tool_choice": ["auto", "named", "none"]}),
        (("reject_named",), {"tool_choice": ["auto", "none", "required"]}),
        (("reject_none",), {"tool_choice": ["auto", "named", "required"]}),
        (("ignore_parallel",), {"parallel_tool_calls_parameter": False}),
        (("reject_parallel",), {"parallel_tool_calls_parameter": False}),
        (("single_call",), {"parallel_tool_calls": False}),
        (("no_index",), {"stream_tool_index": False}),
        (("whole_calls",), {"stream_tool_deltas": False}),
        (("whole_calls", "no_index"), {"stream_tool_deltas": False, "stream_tool_index": False}),
        (("reasoning_content",), {"reasoning_field": "reasoning_content"}),
        (("reasoning",), {"reasoning_field": "reasoning"}),
        (("refuse_strict",), {"strict_schema": False}),
        (("ignore_strict",), {"strict_schema": False}),
        (("bad_arguments",), {"strict_schema": False}),
        (("reject_stream_options",), {"stream_usage": False}),
        (("system_first",), {"system_message": "first"}),
        (("no_system",), {"system_message": "none"}),
        (("no_images",), {"user_content": ["audio", "document", "file"]}),
        (("images_500",), {"user_content": ["audio", "document", "file"]}),
    ],
)
def test_probe_reports_each_quirk(
    capsys: pytest.CaptureFixture[str], quirks: tuple[str, ...], expected: dict[str, Any]
) -> None:
    with compatible_server(*quirks) as server:
        status, out, err = run_probe(capsys, server.url, "--json")
    assert status == 0, err
    result = json.loads(out)
    measured = {key: result["profile"][key] for key in DEFAULTS}
    assert measured == {**DEFAULTS, **expected}
    # Without a system role, the probe of a later system message is skipped.
    # A 500 is retried once before it counts as a refusal.
    expected_requests = 13 if "no_system" in quirks else 15 if "images_500" in quirks else 14
    assert result["requests"] == len(server.requests) == expected_requests
    assert err.splitlines()[0] == f"probing local-model at {server.url}: {PLAN}"


@pytest.mark.parametrize(
    ("quirks", "value", "evidence"),
    [
        ((), True, 'accepted; asked for "kelvin", the model sent the one allowed "celsius"'),
        (("refuse_strict",), False, "refused: probe API error 400: strict is not supported"),
        (
            ("ignore_strict",),
            False,
            'accepted, not enforced: off-schema arguments \'{"unit": "kelvin"}\'',
        ),
        (
            ("bad_arguments",),
            False,
            "accepted, not enforced: off-schema arguments '{\"broken\": '",
        ),
    ],
)
def test_probe_measures_whether_strict_is_enforced(
    capsys: pytest.CaptureFixture[str], quirks: tuple[str, ...], value: bool, evidence: str
) -> None:
    with compatible_server(*quirks) as server:
        status, out, _ = run_probe(capsys, server.url, "--json")
    result = json.loads(out)
    assert status == 0
    assert (result["profile"]["strict_schema"], result["evidence"]["strict_schema"]) == (
        value,
        evidence,
    )
    (sent,) = [body for body in server.requests if _strict(body)]
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "set_unit"}}
    assert "kelvin" in sent["messages"][-1]["content"]


@pytest.mark.parametrize(
    ("quirks", "forced"),
    [
        (("reject_named",), "required"),
        (("reject_named", "reject_required"), None),
    ],
)
def test_probe_forces_the_strict_call_with_a_supported_tool_choice(
    capsys: pytest.CaptureFixture[str], quirks: tuple[str, ...], forced: str | None
) -> None:
    with compatible_server(*quirks, "ignore_strict") as server:
        status, out, _ = run_probe(capsys, server.url, "--json")
    assert status == 0
    assert json.loads(out)["profile"]["strict_schema"] is False
    (sent,) = [body for body in server.requests if _strict(body)]
    assert sent.get("tool_choice") == forced


def test_probe_tries_each_keyword_alone_when_the_schema_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with compatible_server(refused_keywords={"multipleOf", "$defs"}) as server:
        status, out, _ = run_probe(capsys, server.url, "--json")
    result = json.loads(out)
    assert status == 0
    assert result["profile"]["refused_schema_keywords"] == ["$defs", "$ref", "multipleOf"]
    assert result["requests"] == len(server.requests) == 13 + 7 + 1


def test_probe_without_tools_skips_the_tool_probes(capsys: pytest.CaptureFixture[str]) -> None:
    with compatible_server("no_tools") as server:
        status, out, _ = run_probe(capsys, server.url, "--json")
    result = json.loads(out)
    assert status == 0
    assert result["profile"]["tools"] is False
    assert result["evidence"]["tools"].startswith("refused: ")
    assert len(server.requests) == result["requests"] == 5


@pytest.mark.parametrize(
    ("quirk", "tools", "evidence"),
    [
        ("drop_tools", False, "dropped: the prompt is 10 tokens with the tool and 10 without"),
        ("decline", True, "accepted: the tool reached the model (60 > 10 prompt tokens)"),
    ],
)
def test_probe_tells_a_server_dropping_tools_from_a_model_declining(
    capsys: pytest.CaptureFixture[str], quirk: str, tools: bool, evidence: str
) -> None:
    with compatible_server(quirk) as server:
        status, out, _ = run_probe(capsys, server.url, "--json", "--no-max-tools")
    result = json.loads(out)
    assert status == 0
    assert result["profile"]["tools"] is tools
    assert result["evidence"]["tools"].startswith(evidence)
    plain = [body for body in server.requests if "tools" not in body]
    assert plain and plain[0]["messages"] == server.requests[0]["messages"]


def test_probe_catches_a_named_tool_choice_calling_another_tool(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with compatible_server("ignore_named") as server:
        status, out, _ = run_probe(capsys, server.url, "--json", "--no-max-tools")
    assert status == 0
    result = json.loads(out)
    assert "named" not in result["profile"]["tool_choice"]
    assert "named: ignored (called get_time)" in result["evidence"]["tool_choice"]


def test_probe_counts_a_retried_request_again(capsys: pytest.CaptureFixture[str]) -> None:
    with compatible_server("unavailable_once") as server:
        status, out, _ = run_probe(capsys, server.url, "--json", "--no-max-tools")
    assert status == 0
    assert json.loads(out)["requests"] == len(server.requests) == 14  # 13, and one retried


def test_probe_prints_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    with compatible_server("reject_required", "whole_calls") as server:
        status, out, err = run_probe(capsys, server.url)
    assert status == 0
    # A line per request on stderr, as it is sent; stdout holds the table alone.
    progress = err.splitlines()[1:]
    assert progress[:3] == [
        "request 1: tools",
        "request 2: tool_choice=required",
        "request 3: tool_choice=named",
    ]
    assert progress == [
        f"request {n}: {line.split(': ', 1)[1]}" for n, line in enumerate(progress, 1)
    ]
    assert len(progress) == 14
    lines = out.splitlines()
    assert lines[0].split() == ["feature", "value", "evidence"]
    assert any(line.split()[:2] == ["stream_tool_deltas", "False"] for line in lines)
    assert "required: refused" in out
    assert any(line.split()[:2] == ["max_tools", "None"] for line in lines)
    assert lines[-1] == "14 requests made"


def test_written_profile_makes_the_quirky_server_work(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "local.json"
    spec = ToolSpecification(
        name="get_weather",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}},
    )
    request = ChatRequest(
        messages=[UserMessage(content="Weather in Paris and London?")],
        parameters=ChatRequestParameters(
            tools=[spec], tool_choice=ToolChoice.REQUIRED, parallel_tool_calls=False
        ),
    )
    with compatible_server("reject_required", "reject_parallel", "whole_calls") as server:
        status, _, err = run_probe(capsys, server.url, "--write", str(path))
        assert status == 0
        assert err.splitlines()[-1] == f"profile written to {path}"
        plain = OpenAIChatModel("local-model", base_url=server.url, max_retries=0)
        with pytest.raises(ModelError, match="400"):
            plain.chat(request)
        profiled = OpenAIChatModel(
            "local-model", base_url=server.url, max_retries=0, profile=str(path)
        )
        events = list(profiled.stream(request))
    final = events[-1]
    assert isinstance(final, ResponseComplete)
    assert [a["feature"] for a in final.response.metadata["adaptations"]] == [
        "tool_choice",
        "parallel_tool_calls",
        "stream_tool_deltas",
    ]
    sent = server.requests[-1]
    assert "stream" not in sent and "parallel_tool_calls" not in sent
    assert sent["tool_choice"] == "auto"
    assert sent["messages"][0]["role"] == "system"


def test_probe_stops_on_a_failure_that_is_not_a_refusal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with compatible_server() as server:
        status, _, err = run_probe(capsys, server.url.removesuffix("/v1") + "/wrong")
    assert status == 1
    assert "probe failed: probe API error 404: not found" in err
    assert len(server.requests) == 1


def test_probe_refuses_a_non_compatible_prefix(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["probe", "--model", "anthropic:claude-x"])
    assert status == 2
    assert "is not an OpenAI-compatible model" in capsys.readouterr().err


def test_probe_stops_on_an_answer_without_choices(capsys: pytest.CaptureFixture[str]) -> None:
    with compatible_server("no_choices") as server:
        status, out, err = run_probe(capsys, server.url, "--json")
    assert (status, out) == (1, "")
    assert "probe failed: probe tools: unexpected answer" in err
    assert len(server.requests) == 1


def test_probe_of_a_compatible_prefix_keeps_what_it_does_not_measure(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with compatible_server("whole_calls") as server:
        monkeypatch.setenv("OLLAMA_BASE_URL", server.url)
        status = main(["probe", "--model", "ollama:qwen3", "--json", "--no-max-tools"])
    result = json.loads(capsys.readouterr().out)
    assert status == 0
    assert result["profile"]["name"] == "qwen3"
    assert result["profile"]["max_tools"] is None  # from the built-in ollama profile
    assert result["evidence"]["max_tools"] == "not measured: from the ollama profile"
    assert result["profile"]["tool_choice"] == ["auto", "named", "none", "required"]
    assert result["profile"]["stream_tool_deltas"] is False


def _offered(body: dict[str, Any]) -> int:
    """How many tools a `max_tools` request offered (0 for the other requests)."""
    tools = body.get("tools", ())
    return len(tools) if tools and tools[0]["function"]["name"] == "t0" else 0


@pytest.mark.parametrize("limit", [1, 2, 127, 128, 129, 700, 1023])
def test_probe_measures_max_tools_exactly(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, limit: int
) -> None:
    path = tmp_path / "profile.json"
    with compatible_server(max_tools=limit) as server:
        status, out, err = run_probe(capsys, server.url, "--json", "--write", str(path))
    result = json.loads(out)
    assert status == 0, err
    assert result["profile"]["max_tools"] == ModelProfile.load(path).max_tools == limit
    assert result["evidence"]["max_tools"].startswith(
        f"{limit} tools accepted, {limit + 1} refused: probe API error 400: Invalid 'tools'"
    )
    sizes = [_offered(body) for body in server.requests if _offered(body)]
    assert sizes[0] == 1024 and len(sizes) <= MAX_TOOLS_REQUESTS == 11
    assert {limit, limit + 1} <= {1, *sizes}
    assert result["requests"] == len(server.requests) <= max_requests()
    assert all(
        body["max_tokens"] == 16 and body["tool_choice"] == "none"
        for body in server.requests
        if _offered(body)
    )


def test_probe_reports_no_limit_when_every_tool_is_accepted(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "profile.json"
    with compatible_server() as server:
        status, out, _ = run_probe(capsys, server.url, "--json", "--write", str(path))
    result = json.loads(out)
    assert status == 0
    assert result["profile"]["max_tools"] is ModelProfile.load(path).max_tools is None
    assert result["evidence"]["max_tools"] == "1024 tools accepted: no limit up to that"
    assert [_offered(body) for body in server.requests if _offered(body)] == [1024]


@pytest.mark.parametrize(
    ("quirk", "why"),
    [
        ("overflow_413", "probe API error 413: Invalid 'tools'"),
        ("overflow_no_choices", "an answer without a message"),
        ("overflow_not_json", "probe returned malformed JSON"),
    ],
)
def test_probe_survives_hostile_answers_to_too_many_tools(
    capsys: pytest.CaptureFixture[str], quirk: str, why: str
) -> None:
    with compatible_server(quirk, max_tools=100) as server:
        status, out, err = run_probe(capsys, server.url, "--json")
    assert status == 0, err
    result = json.loads(out)
    assert result["profile"]["max_tools"] == 100
    assert result["evidence"]["max_tools"].startswith(f"100 tools accepted, 101 refused: {why}")
    assert result["requests"] == len(server.requests) <= max_requests()


def test_probe_without_tool_choice_none_measures_max_tools_with_auto(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with compatible_server("reject_none", max_tools=300) as server:
        status, out, _ = run_probe(capsys, server.url, "--json")
    assert status == 0
    assert json.loads(out)["profile"]["max_tools"] == 300
    assert all("tool_choice" not in body for body in server.requests if _offered(body))


def test_no_max_tools_keeps_the_base_value_and_states_fewer_requests(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with compatible_server(max_tools=5) as server:
        status, out, err = run_probe(capsys, server.url, "--json", "--no-max-tools")
    result = json.loads(out)
    assert status == 0
    assert result["profile"]["max_tools"] == 128  # the openai profile's
    assert result["evidence"]["max_tools"] == "not measured: from the openai profile"
    assert not any(map(_offered, server.requests))
    assert result["requests"] == len(server.requests) == 13 == max_requests(max_tools=False) - 8
    assert "at most 21 requests: 14, up to 7 more if a schema keyword is refused;" in err


def test_a_probe_session_can_run_again_after_closing_its_client() -> None:
    with compatible_server("whole_calls") as server:
        session = Probe("local-model", server.url, measure_max_tools=False)
        first, again = session.run(), session.run()
    assert first.profile == again.profile
    assert first.profile.stream_tool_deltas is False
    assert len(server.requests) == 26


def test_probe_asks_required_a_question_a_text_answer_fits(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Asked about the weather, a model calls the tool by itself: `required` must be tried on a
    # prompt that invites text, so a server ignoring it cannot pass.
    with compatible_server("ignore_required") as server:
        status, out, _ = run_probe(capsys, server.url)
    assert status == 0
    assert "required: ignored (no tool call)" in out
    (sent,) = [body for body in server.requests if body.get("tool_choice") == "required"]
    assert sent["messages"][-1]["content"] == "Reply with one word: hello."
