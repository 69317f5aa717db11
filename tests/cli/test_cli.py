"""The `agentforge-typed` command line, run as users run it: in a subprocess."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from http_server import Reply, Request, ScriptedServer

from agentforge_typed import (
    ChatRequestParameters,
    SchemaDialectError,
    UserMessage,
    tool,
)
from agentforge_typed.cli._declare import declaration
from agentforge_typed.cli._target import load_object, load_target
from agentforge_typed.providers import _anthropic_wire, _gemini_wire, _openai_wire, render_schema

ROOT = Path(__file__).resolve().parents[2]
BAD = "tests/fixtures/bad_tools.py"


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `python -m agentforge_typed ARGS` from the repository root (`env`: the whole environment)."""
    environment = dict(os.environ if env is None else env, PYTHONIOENCODING="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "agentforge_typed", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
    )


SUMMARY = re.compile(
    r"== (\d+) model calls, (\d+) tool calls \((\d+) failed\), "
    r"tokens: \d+ in / \d+ out / \d+ total, \d+\.\d\ds"
)

# -- run ---------------------------------------------------------------------------------------


def test_run_weather_shows_calls_results_answer_usage_and_timing() -> None:
    done = cli("run", "examples/weather.py:tools", "What's the weather in Paris?")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    lines = done.stdout.splitlines()
    assert lines[0] == '-> get_weather {"city": "example", "unit": "celsius"}'
    assert re.fullmatch(
        r'<- get_weather \(\d+\.\d ms\): \{"city":"example","temperature":12\.3,'
        r'"unit":"celsius","conditions":"sunny"\}',
        lines[1],
    )
    assert lines[2] == '-> get_forecast {"city": "example", "days": 1, "unit": "celsius"}'
    assert lines[3].startswith("<- get_forecast (")
    # FakeModel's final answer, streamed, one line per tool result.
    assert lines[4].startswith('get_weather: {"city":"example"')
    assert lines[5].startswith("get_forecast: [")
    assert lines[-2] == "== final answer: the text streamed above"
    match = SUMMARY.fullmatch(lines[-1])
    assert match is not None and match.groups() == ("2", "2", "0")


def test_run_json_weather() -> None:
    done = cli("run", "examples/weather.py:tools", "What's the weather in Paris?", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    executions = result["tool_executions"]
    assert [e["call"]["name"] for e in executions] == ["get_weather", "get_forecast"]
    assert [e["failed"] for e in executions] == [False, False]
    assert executions[0]["result"]["value"] == {
        "city": "example",
        "temperature": 12.3,
        "unit": "celsius",
        "conditions": "sunny",
    }
    assert executions[0]["duration_ms"] >= 0
    assert [m["role"] for m in result["messages"]] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    assert result["messages"][0]["content"] == "What's the weather in Paris?"
    assert result["text"] == result["final_response"]["ai_message"]["text"]
    assert len(result["intermediate_responses"]) == 1
    usage = result["usage"]
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"] > 0


def test_run_orders_places_an_order_through_the_sequential_tool() -> None:
    done = cli("run", "examples/orders.py:desk", "Two keyboards, please")
    assert done.returncode == 0, done.stderr
    assert '-> place_order {"order": {"lines": [{"sku": "KB-101", "quantity": 1}]' in done.stdout
    assert "<- place_order (" in done.stdout
    assert '"order_id":"ORD-0001"' in done.stdout


def test_run_json_orders() -> None:
    done = cli("run", "examples/orders.py:desk", "Two keyboards, please", "--json")
    assert done.returncode == 0, done.stderr
    executions = json.loads(done.stdout)["tool_executions"]
    by_name = {e["call"]["name"]: e for e in executions}
    assert set(by_name) == {"list_products", "quote_order", "place_order"}
    assert not any(e["failed"] for e in executions)
    order = json.loads(by_name["place_order"]["call"]["arguments"])["order"]
    assert set(order["shipping"]) == {"street", "city", "postal_code", "country"}
    assert by_name["place_order"]["result"]["value"]["order_id"] == "ORD-0001"
    assert by_name["quote_order"]["result"]["value"] == {
        "subtotal": "49.90",
        "shipping": "7.50",
        "total": "57.40",
    }


def test_run_support_receives_the_module_deps() -> None:
    done = cli("run", "examples/support.py:tools", "Why was I charged twice?")
    assert done.returncode == 0, done.stderr
    assert "<- get_my_account (" in done.stdout
    assert '"name":"Ada Lovelace"' in done.stdout


def test_run_json_support() -> None:
    done = cli("run", "examples/support.py:tools", "Why was I charged twice?", "--json")
    assert done.returncode == 0, done.stderr
    executions = json.loads(done.stdout)["tool_executions"]
    assert [e["call"]["name"] for e in executions] == ["get_my_account", "list_my_tickets"]
    assert executions[0]["call"]["arguments"] == "{}"  # the user id never comes from the model
    assert executions[0]["result"]["value"]["user_id"] == "u-1001"
    assert [t["id"] for t in executions[1]["result"]["value"]] == ["T-17"]


def test_run_with_deps_option_and_an_error_result() -> None:
    # Deps the tools cannot take are refused in one line, before the run.
    done = cli(
        "run",
        "examples/support.py:tools",
        "Who am I?",
        "--deps",
        "tests.fixtures.cli_targets:not_a_tool",
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "agentforge-typed: error: --deps tests.fixtures.cli_targets:not_a_tool gave int, but "
        "get_my_account takes ToolContext[SupportDeps]\n"
    )
    # Deps of the right type, a tool that raises: the error is shown, not fatal.
    done = cli("run", "tests.fixtures.deps_targets:failing", "hi", "--deps", "account")
    assert done.returncode == 0, done.stderr
    assert re.search(
        r"^!! balance execution error \(\d+\.\d ms\): Tool `balance` failed: "
        r"LookupError: no balance for ada$",
        done.stdout,
        re.MULTILINE,
    )


def test_run_deps_option_missing_attribute() -> None:
    done = cli("run", "examples/support.py:tools", "hi", "--deps", "nope")
    assert done.returncode == 2
    assert done.stderr == "agentforge-typed: error: --deps: 'support' has no attribute 'nope'\n"


def test_run_system_message_and_target_kinds() -> None:
    service = cli(
        "run", "tests.fixtures.cli_targets:service", "hi", "--system", "Be brief.", "--json"
    )
    assert service.returncode == 0, service.stderr
    result = json.loads(service.stdout)
    assert result["messages"][0] == {"role": "system", "text": "Be brief."}
    assert [e["result"]["text"] for e in result["tool_executions"]] == ["EXAMPLE"]
    counter = cli("run", "tests.fixtures.cli_targets:counter", "hi", "--json")
    assert json.loads(counter.stdout)["tool_executions"][0]["result"]["value"] == 1
    function = cli("run", "tests/fixtures/cli_targets.py:shout", "hi", "--json")
    assert json.loads(function.stdout)["tool_executions"][0]["call"]["name"] == "shout"


def test_run_max_rounds_exceeded() -> None:
    done = cli("run", "examples/weather.py:tools", "hi", "--max-rounds", "1")
    assert done.returncode == 1
    assert done.stderr == (
        "agentforge-typed: ToolLoopLimitError: no final answer after 1 model round trips\n"
    )
    assert done.stdout.startswith("-> get_weather")


def test_run_unknown_model() -> None:
    done = cli("run", "examples/weather.py:tools", "hi", "--model", "gpt-4o")
    assert done.returncode == 2
    assert done.stderr == (
        "agentforge-typed: error: unknown model 'gpt-4o': expected one of "
        "'openai:<model>', 'openai-responses:<model>', 'anthropic:<model>', 'google:<model>', "
        "'gemini:<model>', 'fake', or an OpenAI-compatible server's '<server>:<model>' "
        "(dashscope, deepseek, gemini-openai, groq, litellm, llamacpp, lmstudio, minimax, "
        "mistral, moonshot, ollama, openrouter, qwen, together, vllm)\n"
    )


def test_run_real_provider_without_a_key() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    done = cli("run", "examples/weather.py:tools", "hi", "--model", "anthropic:claude-x", env=env)
    assert done.returncode == 2
    assert done.stderr.startswith("agentforge-typed: error: no Anthropic API key")
    assert done.stderr.count("\n") == 1


# -- schema ------------------------------------------------------------------------------------


def _as_sent_by_openai(parameters: ChatRequestParameters) -> Any:
    return _openai_wire.build_payload([UserMessage(content="x")], parameters, stream=False)["tools"]


def _as_sent_by_anthropic(parameters: ChatRequestParameters) -> Any:
    payload = _anthropic_wire.build_payload(
        [UserMessage(content="x")], parameters.model_copy(update={"max_tokens": 1})
    )
    return payload["tools"]


def _strict(parameters: ChatRequestParameters) -> Any:
    assert parameters.tools is not None
    tools = [s.model_copy(update={"strict_schema": True}) for s in parameters.tools]
    return _as_sent_by_openai(parameters.model_copy(update={"tools": tools}))


def _gemini(parameters: ChatRequestParameters) -> Any:
    payload = _gemini_wire.build_payload([UserMessage(content="x")], parameters)
    return payload["tools"][0]["functionDeclarations"]


EXPECTED: dict[str, Callable[[ChatRequestParameters], Any]] = {
    "openai": _as_sent_by_openai,
    "openai-strict": _strict,
    "anthropic": _as_sent_by_anthropic,
    "gemini": _gemini,
}


@pytest.mark.parametrize("target", ["examples/weather.py:tools", "examples/orders.py:desk"])
@pytest.mark.parametrize("dialect", sorted(EXPECTED))
def test_schema_matches_what_the_provider_sends(target: str, dialect: str) -> None:
    done = cli("schema", target, "--dialect", dialect)
    assert done.returncode == 0, done.stderr
    specifications = load_target(target).service().specifications
    parameters = ChatRequestParameters(model="m", tools=specifications)
    assert json.loads(done.stdout) == EXPECTED[dialect](parameters)


def test_gemini_declaration_of_a_tool_without_parameters_has_no_parameters() -> None:
    # Gemini refuses `{"type": "object", "properties": {}}`.
    @tool
    def ping() -> str:
        """Check the service is up."""
        return "pong"

    assert declaration(ping.specification, "gemini") == {
        "name": "ping",
        "description": "Check the service is up.",
    }


def test_schema_default_dialect_is_openai_pinned() -> None:
    done = cli("schema", "examples/support.py:tools")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [
        {
            "type": "function",
            "function": {
                "name": "get_my_account",
                "description": "Get the signed-in user's account: name and plan.",
                "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
            },
        },
        {
            "type": "function",
            "function": {
                "name": "list_my_tickets",
                "description": "List the signed-in user's support tickets, newest first.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "status": {
                            "anyOf": [{"$ref": "#/$defs/TicketStatus"}, {"type": "null"}],
                            "default": None,
                            "description": "Only tickets with this status; all tickets when omitted.",
                        }
                    },
                    "additionalProperties": False,
                    "$defs": {
                        "TicketStatus": {
                            "description": "Where a support ticket stands.",
                            "enum": ["open", "closed"],
                            "type": "string",
                        }
                    },
                },
            },
        },
    ]


def _dialect_error(target: str, dialect: str) -> SchemaDialectError:
    """The error the schema module raises, so its wording stays its own."""
    spec = load_target(target).value.specification  # type: ignore[attr-defined]
    with pytest.raises(SchemaDialectError) as info:
        render_schema(spec.parameters, dialect)  # type: ignore[arg-type]
    return info.value


def test_schema_a_dialect_cannot_express() -> None:
    done = cli("schema", f"{BAD}:count", "--dialect", "openai-strict")
    assert done.returncode == 1
    assert done.stdout == ""
    error = _dialect_error(f"{BAD}:count", "openai-strict")
    assert (error.dialect, error.path) == ("openai-strict", "$.totals")
    assert done.stderr == f"agentforge-typed: {error}\n"


def test_schema_gemini_is_what_the_provider_sends_recursion_included() -> None:
    # The Gemini subset cannot express recursion; the JSON Schema Gemini is sent by default can.
    done = cli("schema", f"{BAD}:total", "--dialect", "gemini")
    assert done.returncode == 0, done.stderr
    [declaration] = json.loads(done.stdout)
    schema = declaration["parametersJsonSchema"]
    assert schema["$defs"]["Node"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    assert "recursive" in _dialect_error(f"{BAD}:total", "gemini").reason


# -- check -------------------------------------------------------------------------------------


def _bad_findings() -> list[str]:
    recursive = _dialect_error(f"{BAD}:total", "gemini")
    recursive_strict = _dialect_error(f"{BAD}:total", "anthropic-strict")
    open_object = _dialect_error(f"{BAD}:tag", "openai-strict")
    counts = _dialect_error(f"{BAD}:count", "openai-strict")
    with pytest.raises(TypeError) as variadic:
        tool(load_object(f"{BAD}:variadic")[1])
    return [
        f"{BAD}:16: warning: undocumented: the tool has no description [missing-description]",
        f"{BAD}:16: warning: undocumented: parameter 'city' has no description "
        "[missing-parameter-description]",
        f"{BAD}:31: error: lookup: duplicate tool name (also defined at {BAD}:21) [duplicate-name]",
        f"{BAD}:48: warning: total: not expressible in anthropic-strict at $.tree.children[*]: "
        f"{recursive_strict.reason} [unsupported-schema]",
        f"{BAD}:48: warning: total: not expressible in gemini at $.tree.children[*]: "
        f"{recursive.reason} [unsupported-schema]",
        f"{BAD}:58: error: 2fa_verify: name '2fa_verify' is invalid for gemini: a letter or _ "
        "first, then letters, digits, _, . and -, at most 64 characters [invalid-name]",
        f"{BAD}:67: error: variadic: cannot be made a tool: {variadic.value} [invalid-tool]",
        f"{BAD}:72: error: search: parameter name 'filter[id]' is invalid for anthropic: "
        "letters, digits, _, . and -, 1 to 64 characters [invalid-parameter-name]",
        f"{BAD}:89: error: tag: not expressible in openai-strict at $.labels: "
        f"{open_object.reason} [unsupported-schema]",
        f"{BAD}:89: error: tag: not expressible in anthropic-strict at $.labels: "
        f"{open_object.reason} [unsupported-schema]",
        f"{BAD}:89: note: tag: strict schema: openai: cannot be sent (not expressible in "
        "openai-strict); anthropic: cannot be sent (not expressible in anthropic-strict); "
        "gemini: provider-validated (function calling mode `VALIDATED`, a preview feature) "
        "when the model may choose; with a forced choice (`ANY`), validated locally only "
        "[strictness]",
        f"{BAD}:114: warning: count: not expressible in openai-strict at $.totals: "
        f"{counts.reason} [unsupported-schema]",
        f"{BAD}:114: warning: count: not expressible in anthropic-strict at $.totals: "
        f"{counts.reason} [unsupported-schema]",
        "6 errors, 6 warnings",
    ]


def test_check_reports_every_problem_of_the_bad_module() -> None:
    done = cli("check", f"{BAD}:tools")
    assert done.stdout.splitlines() == _bad_findings()
    assert done.stderr == ""
    assert done.returncode == 1


def test_check_finding_lines_point_at_the_def() -> None:
    source = (ROOT / BAD).read_text().splitlines()
    for line, name in [(16, "undocumented"), (31, "lookup_again"), (67, "variadic")]:
        assert source[line - 1].startswith(f"def {name}(")


def test_check_dialect_option_narrows_the_check() -> None:
    done = cli("check", f"{BAD}:tools", "--dialect", "openai")
    findings = done.stdout.splitlines()
    assert not any("gemini" in f or "anthropic" in f for f in findings)
    assert findings[-1] == "3 errors, 2 warnings"


def test_check_openai_strict_alone_makes_a_strict_schema_tool_an_error() -> None:
    findings = cli("check", f"{BAD}:tools", "--dialect", "openai-strict").stdout.splitlines()
    assert [f.split(": ")[1:3] for f in findings if "unsupported-schema" in f] == [
        ["error", "tag"],
        ["warning", "count"],
    ]


def test_check_warnings_alone_pass_unless_strict() -> None:
    lenient = cli("check", f"{BAD}:undocumented")
    assert lenient.returncode == 0
    assert lenient.stdout.splitlines()[-1] == "0 errors, 2 warnings"
    strict = cli("check", f"{BAD}:undocumented", "--strict")
    assert strict.returncode == 1


@pytest.mark.parametrize(
    "target", ["examples/weather.py:tools", "examples/orders.py:desk", "examples/support.py:tools"]
)
def test_check_examples_are_clean(target: str) -> None:
    done = cli(
        "check",
        target,
        "--strict",
        "--dialect",
        "openai",
        "--dialect",
        "anthropic",
        "--dialect",
        "gemini",
    )
    assert (done.returncode, done.stdout) == (0, "0 errors, 0 warnings\n")


# -- bad TARGETs -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (
            "examples/weather.py",
            "expected module:attribute or path/to/file.py:attribute, got 'examples/weather.py'",
        ),
        ("no_such_module_xyz:tools", "no module named 'no_such_module_xyz'"),
        ("examples/nope.py:tools", "no such file: 'examples/nope.py'"),
        ("examples/weather.py:nope", "'examples/weather.py' has no attribute 'nope'"),
        (
            "tests.fixtures.cli_targets:missing",
            "'tests.fixtures.cli_targets' has no attribute 'missing'",
        ),
        (
            "tests.fixtures.cli_targets:not_a_tool",
            "tests.fixtures.cli_targets:not_a_tool is a int, not a Tool, a function, a list of "
            "them, an object with @tool methods, or a ToolService",
        ),
        (
            "tests.fixtures.cli_targets:Counter",
            "tests.fixtures.cli_targets:Counter is the class Counter (pass an instance), not a "
            "Tool, a function, a list of them, an object with @tool methods, or a ToolService",
        ),
        (
            "tests.fixtures.cli_targets:empty",
            "tests.fixtures.cli_targets:empty is empty, not a Tool, a function, a list of them, "
            "an object with @tool methods, or a ToolService",
        ),
        (
            "tests.fixtures.cli_targets:exploding",
            "tests.fixtures.cli_targets:exploding: inspecting it failed: RuntimeError: cannot "
            "read specification",
        ),
        (
            "tests.fixtures.cli_targets:lazy",
            "reading 'lazy' of 'tests.fixtures.cli_targets' failed: RuntimeError: the lazy "
            "attribute failed to load",
        ),
        (
            "tests/fixtures/broken_import.py:tools",
            "importing 'tests/fixtures/broken_import.py' failed: "
            "RuntimeError: this module cannot be imported",
        ),
        (
            "tests.fixtures.broken_import:tools",
            "importing 'tests.fixtures.broken_import' failed: "
            "RuntimeError: this module cannot be imported",
        ),
    ],
)
def test_bad_target_is_one_line_exit_2(target: str, message: str) -> None:
    done = cli("run", target, "hello")
    assert (done.returncode, done.stderr, done.stdout) == (
        2,
        f"agentforge-typed: error: {message}\n",
        "",
    )


@pytest.mark.parametrize("command", ["schema", "check"])
@pytest.mark.parametrize(
    "target", ["no_such_module_xyz:tools", "tests.fixtures.cli_targets:not_a_tool"]
)
def test_bad_target_under_schema_and_check(command: str, target: str) -> None:
    done = cli(command, target)
    assert done.returncode == 2
    assert done.stderr.startswith("agentforge-typed: error: ")
    assert done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_run_a_list_that_cannot_all_be_tools() -> None:
    done = cli("run", f"{BAD}:tools", "hi")
    assert done.returncode == 2
    assert done.stderr == (
        f"agentforge-typed: error: {BAD}:tools: ValueError: a tool named 'lookup' is already "
        "registered\n"
    )


# -- help and entry point ----------------------------------------------------------------------


@pytest.mark.parametrize("command", [[], ["run"], ["schema"], ["check"]])
def test_help_on_every_command(command: list[str]) -> None:
    done = cli(*command, "--help")
    assert done.returncode == 0
    assert done.stdout.startswith(f"usage: agentforge-typed {' '.join(command)}".rstrip())
    assert "TARGET" in done.stdout or "COMMAND" in done.stdout


def test_console_script_entry_point(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentforge_typed.__main__ import main

    monkeypatch.chdir(ROOT)
    assert main(["schema", "examples/weather.py:tools", "--dialect", "anthropic"]) == 0
    names = [tool["name"] for tool in json.loads(capsys.readouterr().out)]
    assert names == ["get_weather", "get_forecast"]


def test_run_refuses_a_tool_its_strict_dialect_cannot_express() -> None:
    done = cli("run", f"{BAD}:tag", "hi")
    assert done.returncode == 2
    assert done.stderr.startswith("agentforge-typed: ") and "$.labels" in done.stderr
    assert "Traceback" not in done.stderr


def _sunny(request: Request) -> Reply:
    """An OpenAI-compatible answer in text, streamed when asked to be."""
    message = {"role": "assistant", "content": "Sunny."}
    head = {"id": "chatcmpl-1", "created": 1, "model": "gemma"}
    if request.json().get("stream"):
        chunk = {**head, "object": "chat.completion.chunk"}
        return Reply.sse(
            [
                {**chunk, "choices": [{"index": 0, "delta": message, "finish_reason": None}]},
                {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            ],
            done=True,
        )
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    return Reply.json({**head, "object": "chat.completion", "choices": [choice]})


def test_run_max_tokens_reaches_a_compatible_server_named_in_help(
    http_server: ScriptedServer,
) -> None:
    assert "llamacpp" in cli("run", "--help").stdout
    http_server.route("/v1/chat/completions", _sunny)
    env = dict(os.environ, LLAMACPP_BASE_URL=f"{http_server.url}/v1")
    args = ["run", "examples/weather.py:tools", "hi", "--model", "llamacpp:gemma"]
    done = cli(*args, "--max-tokens", "7", "--json", env=env)
    plain = cli(*args, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["final_response"]["ai_message"]["text"] == "Sunny."
    assert plain.returncode == 0, plain.stderr
    assert [r.json().get("max_tokens") for r in http_server.requests] == [7, None]
    assert cli(*args, "--max-tokens", "0", env=env).returncode == 2


def test_run_on_a_run_that_pauses_says_so_with_its_own_exit_status() -> None:
    done = cli("run", "tests/fixtures/cli_targets.py:refund", "refund A-1")
    assert done.returncode == 3, done.stderr
    assert "== paused: 1 call(s) wait for a decision: refund (" in done.stdout
    assert "approval)" in done.stdout
    as_json = cli("run", "tests/fixtures/cli_targets.py:refund", "refund A-1", "--json")
    assert as_json.returncode == 3
    [pending] = json.loads(as_json.stdout)["pending"]
    assert pending["reason"] == "approval" and pending["call"]["name"] == "refund"


def test_run_falls_back_when_the_model_s_server_is_down() -> None:
    with ScriptedServer() as server:
        url = server.url  # bound, then closed: nothing listens there any more
    env = dict(os.environ, LLAMACPP_BASE_URL=f"{url}/v1")
    args = ["run", "examples/weather.py:tools", "weather in Paris?", "--model", "llamacpp:gemma"]
    shown = cli(*args, "--fallback", "fake", env=env)
    assert shown.returncode == 0, shown.stderr
    assert "== answered by a fallback model: FakeModel" in shown.stdout
    as_json = cli(*args, "--fallback", "fake", "--json", env=env)
    fallback = json.loads(as_json.stdout)["final_response"]["metadata"]["fallback"]
    assert (fallback["index"], fallback["failed"][0]["model"]) == (1, "OpenAIChatModel('gemma')")
    unknown = cli(*args, "--fallback", "gpt-4o", env=env)
    assert unknown.returncode == 2 and "unknown model 'gpt-4o'" in unknown.stderr


def test_check_says_a_strict_tool_a_provider_cannot_take_gets_nothing_from_it(
    tmp_path: Path,
) -> None:
    source = tmp_path / "recursive.py"
    source.write_text(
        "from __future__ import annotations\n"
        "from pydantic import BaseModel\n"
        "from agentforge_typed import tool\n\n\n"
        "class Node(BaseModel):\n"
        "    name: str\n"
        "    children: list[Node] = []\n\n\n"
        "@tool(strict_schema=True)\n"
        "def walk(root: Node) -> str:\n"
        '    """Walk a tree.\n\n    Args:\n        root: The tree.\n    """\n'
        "    return root.name\n\n\n"
        "tools = [walk]\n"
    )
    done = cli("check", f"{source}:tools", "--dialect", "openai", "--dialect", "anthropic")
    assert done.returncode == 1
    (note,) = [line for line in done.stdout.splitlines() if line.endswith("[strictness]")]
    assert note.endswith(
        "note: walk: strict schema: openai: provider-enforced (`strict: true`, OpenAI structured "
        "outputs); anthropic: cannot be sent (not expressible in anthropic-strict) [strictness]"
    )


def test_check_reports_a_default_that_violates_its_own_type(tmp_path: Path) -> None:
    source = tmp_path / "defaults.py"
    source.write_text(
        "def forecast(city: str, days: int = '3') -> str:\n"
        '    """Forecast.\n\n    Args:\n        city: The city.\n        days: Days ahead.\n    """\n'
        "    return city\n\n\n"
        "tools = [forecast]\n"
    )
    done = cli("check", f"{source}:tools", "--dialect", "openai")
    assert done.returncode == 1
    assert done.stdout.splitlines()[0] == (
        f"{source}:1: error: forecast: cannot be made a tool: tool `forecast` ('forecast'), "
        "parameter `days`: the default '3' does not fit the parameter's type `int` (Input should "
        "be a valid integer); give a default of that type [invalid-tool]"
    )
