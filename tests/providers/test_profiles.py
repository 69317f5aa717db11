"""Model profiles: each degradation rule on the wire, against a real local server with the quirk
the rule works around, the `"error"` policy refusing before sending, and the registry's
compatible-server prefixes."""

from __future__ import annotations

import asyncio
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
    ResponseFormat,
    StreamEvent,
    SystemMessage,
    ToolCallDelta,
    ToolChoice,
    ToolSpecification,
    UnsupportedFeatureError,
    UserMessage,
    get_model,
)
from agentforge_typed.providers._degrade import ONE_CALL_NOTE, REQUIRED_NOTE
from agentforge_typed.providers._profiles import PROFILES, resolve_profile
from agentforge_typed.providers._registry import _OPENAI, COMPATIBLE
from agentforge_typed.providers.openai import OpenAIChatModel

WEATHER = ToolSpecification(
    name="get_weather",
    description="The weather in a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string", "minLength": 1, "description": "The city."}},
        "required": ["city"],
        "additionalProperties": False,
    },
)
TIME = ToolSpecification(
    name="get_time",
    description="The time in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


def request(*messages: Any, **parameters: Any) -> ChatRequest:
    messages = messages or (UserMessage(content="Weather in Paris and London?"),)
    parameters.setdefault("tools", [WEATHER, TIME])
    return ChatRequest(messages=messages, parameters=ChatRequestParameters(**parameters))


def model(url: str, **profile: Any) -> OpenAIChatModel:
    return OpenAIChatModel(
        "local-model", base_url=url, max_retries=0, profile=ModelProfile(name="local", **profile)
    )


def collect(events: Any) -> list[StreamEvent]:
    return list(events)


async def acollect(events: Any) -> list[StreamEvent]:
    return [event async for event in events]


# -- tool_choice ---------------------------------------------------------------------------------


def test_required_is_refused_by_the_server_without_a_profile() -> None:
    with compatible_server("reject_required") as server:
        plain = OpenAIChatModel("local-model", base_url=server.url, max_retries=0)
        with pytest.raises(ModelError, match="400"):
            plain.chat(request(tool_choice=ToolChoice.REQUIRED))


def test_required_becomes_auto_with_an_instruction_and_is_recorded() -> None:
    with compatible_server("reject_required") as server:
        answer = model(server.url, tool_choice={"auto", "none", "named"}).chat(
            request(
                SystemMessage(text="Be brief."),
                UserMessage(content="Weather?"),
                tool_choice=ToolChoice.REQUIRED,
            )
        )
    sent = server.requests[0]
    assert sent["tool_choice"] == "auto"
    assert sent["messages"][0] == {"role": "system", "content": f"Be brief.\n\n{REQUIRED_NOTE}"}
    assert answer.metadata["adaptations"] == [
        {
            "feature": "tool_choice",
            "rule": "required → auto, with an instruction in the system prompt",
        }
    ]


def test_error_policy_refuses_before_sending() -> None:
    with compatible_server("reject_required") as server:
        strict = model(server.url, tool_choice={"auto", "none"}, policy={"tool_choice": "error"})
        with pytest.raises(UnsupportedFeatureError) as info:
            strict.chat(request(tool_choice=ToolChoice.REQUIRED))
        with pytest.raises(UnsupportedFeatureError):
            asyncio.run(strict.achat(request(tool_choice=ToolChoice.REQUIRED)))
    assert info.value.feature == "tool_choice"
    assert "profile 'local' does not support tool_choice" in str(info.value)
    assert server.requests == []


def test_named_choice_becomes_required_with_only_that_tool() -> None:
    with compatible_server("reject_named") as server:
        answer = model(server.url, tool_choice={"auto", "required", "none"}).chat(
            request(tool_choice="get_time")
        )
    sent = server.requests[0]
    assert sent["tool_choice"] == "required"
    assert [tool["function"]["name"] for tool in sent["tools"]] == ["get_time"]
    assert all(m["role"] != "system" for m in sent["messages"])
    assert [call.name for call in answer.ai_message.tool_calls] == ["get_time", "get_time"]


def test_named_choice_without_required_becomes_auto_with_an_instruction() -> None:
    with compatible_server("reject_named", "reject_required") as server:
        model(server.url, tool_choice={"auto"}).chat(request(tool_choice="get_time"))
    sent = server.requests[0]
    assert sent["tool_choice"] == "auto"
    assert "You must call the tool `get_time`" in sent["messages"][0]["content"]


def test_none_unsupported_sends_no_tools() -> None:
    with compatible_server("reject_none") as server:
        answer = model(server.url, tool_choice={"auto", "required"}).chat(
            request(tool_choice=ToolChoice.NONE, parallel_tool_calls=True)
        )
    assert set(server.requests[0]) == {"model", "messages"}
    assert answer.ai_message.text == "Done."


def test_auto_unsupported_is_left_out_and_recorded_async() -> None:
    with compatible_server() as server:
        answer = asyncio.run(
            model(server.url, tool_choice={"required"}).achat(request(tool_choice=ToolChoice.AUTO))
        )
    assert "tool_choice" not in server.requests[0]
    assert answer.metadata["adaptations"] == [
        {"feature": "tool_choice", "rule": "auto → not sent (the server's default)"}
    ]


# -- parallel_tool_calls, strict, schema keywords --------------------------------------------------


def test_parallel_parameter_dropped_and_one_call_asked_for_in_the_prompt() -> None:
    with compatible_server("reject_parallel") as server:
        answer = model(server.url, parallel_tool_calls_parameter=False).chat(
            request(parallel_tool_calls=False)
        )
    sent = server.requests[0]
    assert "parallel_tool_calls" not in sent
    assert sent["messages"][0] == {"role": "system", "content": ONE_CALL_NOTE}
    assert answer.metadata["adaptations"][0]["feature"] == "parallel_tool_calls"


def test_strict_schema_sent_plain_when_the_server_refuses_strict() -> None:
    strict_weather = WEATHER.model_copy(update={"strict_schema": True})
    with compatible_server("refuse_strict") as server:
        answer = model(server.url, strict_schema=False).chat(request(tools=[strict_weather]))
    function = server.requests[0]["tools"][0]["function"]
    assert "strict" not in function
    assert function["parameters"]["properties"]["city"] == {
        "type": "string",
        "minLength": 1,
        "description": "The city.",
    }
    assert answer.ai_message.tool_calls[0].arguments == '{"city": "Paris"}'
    assert answer.metadata["adaptations"][0]["feature"] == "strict_schema"


def test_strict_response_format_sent_plain() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    response_format = ResponseFormat(name="answer", json_schema=schema)
    with compatible_server() as server:
        answer = model(server.url, strict_schema=False).chat(
            request(tools=None, response_format=response_format)
        )
    sent = server.requests[0]["response_format"]["json_schema"]
    assert sent == {"name": "answer", "schema": schema, "strict": False}
    assert answer.metadata["adaptations"] == [
        {"feature": "strict_schema", "rule": "response_format sent without strict"}
    ]


def test_refused_keywords_move_into_descriptions() -> None:
    refused = {"minLength", "additionalProperties"}
    with compatible_server(refused_keywords=refused) as server:
        plain = OpenAIChatModel("m", base_url=server.url, max_retries=0)
        with pytest.raises(ModelError, match="Unknown name"):
            plain.chat(request())
        answer = model(server.url, refused_schema_keywords=refused).chat(request())
    parameters = server.requests[1]["tools"][0]["function"]["parameters"]
    assert parameters == {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "The city. (minLength: 1)"}},
        "required": ["city"],
        "description": "additionalProperties: false",
    }
    assert "minLength, additionalProperties" not in str(answer.metadata)
    assert answer.metadata["adaptations"][0]["rule"].startswith(
        "additionalProperties, minLength of 'get_weather' moved"
    )


def test_a_property_named_like_a_refused_keyword_is_kept() -> None:
    spec = ToolSpecification(
        name="search",
        parameters={"type": "object", "properties": {"pattern": {"type": "string"}}},
    )
    with compatible_server(refused_keywords={"pattern"}) as server:
        model(server.url, refused_schema_keywords={"pattern"}).chat(request(tools=[spec]))
    sent = server.requests[0]["tools"][0]["function"]["parameters"]
    assert sent["properties"] == {"pattern": {"type": "string"}}


def test_a_refused_structural_keyword_is_an_error_before_sending() -> None:
    with compatible_server() as server:
        with pytest.raises(UnsupportedFeatureError, match="'anyOf'") as info:
            model(server.url, refused_schema_keywords={"anyOf"}).chat(
                request(
                    tools=[
                        ToolSpecification(
                            name="f",
                            parameters={
                                "type": "object",
                                "properties": {
                                    "x": {"anyOf": [{"type": "string"}, {"type": "null"}]}
                                },
                            },
                        )
                    ]
                )
            )
    assert info.value.feature == "schema_keywords"
    assert server.requests == []


@pytest.mark.parametrize(
    ("profile", "feature"),
    [({"tools": False}, "tools"), ({"max_tools": 1}, "max_tools")],
)
def test_features_without_an_adaptation_always_raise(profile: dict[str, Any], feature: str) -> None:
    with compatible_server() as server:
        with pytest.raises(UnsupportedFeatureError) as info:
            model(server.url, policy={feature: "adapt"}, **profile).chat(request())
    assert info.value.feature == feature
    assert server.requests == []


# -- streams -------------------------------------------------------------------------------------


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_stream_without_tool_deltas_is_buffered(driver: str) -> None:
    with compatible_server("whole_calls", "no_index") as server:
        profiled = model(server.url, stream_tool_deltas=False)
        events = (
            collect(profiled.stream(request()))
            if driver == "sync"
            else asyncio.run(acollect(profiled.astream(request())))
        )
        blocking = model(server.url, stream_tool_deltas=False).chat(request())
    assert "stream" not in server.requests[0]
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert [(d.index, d.name) for d in deltas] == [(0, "get_weather"), (1, "get_weather")]
    final = events[-1]
    assert isinstance(final, ResponseComplete)
    assert final.response.ai_message == blocking.ai_message
    assert final.response.token_usage == blocking.token_usage
    assert final.response.metadata["adaptations"] == [
        {
            "feature": "stream_tool_deltas",
            "rule": "answered from one blocking call: the endpoint does not stream tool calls",
        }
    ]


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_stream_usage_not_asked_for_and_adaptations_recorded_on_the_stream(driver: str) -> None:
    with compatible_server("reject_stream_options", "reject_required") as server:
        profiled = model(server.url, stream_usage=False, tool_choice={"auto"})
        req = request(tool_choice=ToolChoice.REQUIRED)
        events = (
            collect(profiled.stream(req))
            if driver == "sync"
            else asyncio.run(acollect(profiled.astream(req)))
        )
    sent = server.requests[0]
    assert sent["stream"] is True and "stream_options" not in sent
    final = events[-1]
    assert isinstance(final, ResponseComplete)
    assert [a["feature"] for a in final.response.metadata["adaptations"]] == [
        "tool_choice",
        "stream_usage",
    ]
    assert len(final.response.ai_message.tool_calls) == 2


# -- system messages ------------------------------------------------------------------------------


def test_system_messages_merged_first_for_templates_that_raise() -> None:
    messages = (
        SystemMessage(text="Be brief."),
        UserMessage(content="Hi"),
        SystemMessage(text="Answer in French."),
    )
    with compatible_server("system_first") as server:
        answer = model(server.url, system_message="first").chat(request(*messages, tools=None))
    assert server.requests[0]["messages"] == [
        {"role": "system", "content": "Be brief.\n\nAnswer in French."},
        {"role": "user", "content": "Hi"},
    ]
    assert answer.metadata["adaptations"][0]["feature"] == "system_message"


def test_system_text_folded_into_the_first_user_message_without_a_system_role() -> None:
    messages = (SystemMessage(text="Be brief."), UserMessage(content="Weather in Paris?"))
    with compatible_server("no_system", "reject_required") as server:
        model(server.url, system_message="none", tool_choice={"auto"}).chat(
            request(*messages, tool_choice=ToolChoice.REQUIRED)
        )
    assert server.requests[0]["messages"] == [
        {"role": "user", "content": f"Be brief.\n\n{REQUIRED_NOTE}\n\nWeather in Paris?"}
    ]


def test_no_adaptation_no_metadata() -> None:
    with compatible_server() as server:
        answer = OpenAIChatModel("m", base_url=server.url, max_retries=0, profile="openai").chat(
            request(tool_choice=ToolChoice.REQUIRED, parallel_tool_calls=True)
        )
    assert "adaptations" not in answer.metadata
    assert server.requests[0]["tool_choice"] == "required"


# -- profiles and the registry --------------------------------------------------------------------


def test_profile_file_round_trip_and_names(tmp_path: Path) -> None:
    path = tmp_path / "local.json"
    PROFILES["ollama"].dump(path)
    assert ModelProfile.load(path) == PROFILES["ollama"]
    assert resolve_profile(str(path)) == PROFILES["ollama"]
    assert resolve_profile("gemini-openai") is PROFILES["gemini-openai"]
    with pytest.raises(ValueError, match="unknown profile 'nope'"):
        resolve_profile("nope")
    with pytest.raises(ValueError, match="max_tools"):
        ModelProfile(max_tools=-1)
    with pytest.raises(ValueError, match="colour"):
        ModelProfile.model_validate({"colour": "blue"})
    with pytest.raises(ValueError, match="policy"):
        ModelProfile(policy={"tool_choice": "ignore"})  # type: ignore[dict-item]


def test_compatible_prefixes_know_url_key_and_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-deepseek-0123456789")
    monkeypatch.delenv("DEEPSEEK_BASE_URL", raising=False)
    deepseek = get_model("deepseek:deepseek-chat")
    assert isinstance(deepseek, OpenAIChatModel)
    assert deepseek.base_url == "https://api.deepseek.com"
    assert deepseek.profile is PROFILES["deepseek"]
    assert deepseek.model == "deepseek-chat"
    qwen = get_model("qwen:qwen3-max", api_key="k")
    assert isinstance(qwen, OpenAIChatModel) and qwen.profile is PROFILES["dashscope"]
    monkeypatch.setenv("OLLAMA_BASE_URL", "http://gpu-box:11434/v1")
    ollama = get_model("ollama:qwen3", profile="vllm")
    assert isinstance(ollama, OpenAIChatModel)
    assert (ollama.base_url, ollama.profile) == ("http://gpu-box:11434/v1", PROFILES["vllm"])


def test_hosted_prefix_without_a_key_says_which_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GROQ_API_KEY", raising=False)
    monkeypatch.delenv("GROQ_BASE_URL", raising=False)
    with pytest.raises(ModelError, match="GROQ_API_KEY"):
        get_model("groq:llama-3.3-70b-versatile")


def test_compatible_prefix_talks_to_the_server_with_its_profile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with compatible_server("reject_parallel", "whole_calls") as server:
        monkeypatch.setenv("OLLAMA_BASE_URL", server.url)
        ollama = get_model("ollama:qwen3", max_retries=0)
        events = list(ollama.stream(request(parallel_tool_calls=True)))
    final = events[-1]
    assert isinstance(final, ResponseComplete)
    assert [a["feature"] for a in final.response.metadata["adaptations"]] == [
        "parallel_tool_calls",
        "stream_tool_deltas",
    ]


def test_every_builtin_profile_is_reachable_by_a_prefix() -> None:
    assert {server.label for server in COMPATIBLE.values()} == set(PROFILES) - {"openai"}


def profile_table() -> str:
    """The table of docs/reference/compatible-servers.md, from the code."""
    prefixes: dict[str, list[str]] = {}
    for prefix, server in COMPATIBLE.items():
        prefixes.setdefault(server.label, []).append(prefix)
    rows = [
        "| profile | `get_model` prefix | base URL | base URL variable | key variable | tool_choice | parallel_tool_calls | streamed tool deltas | strict | refused keywords | reasoning | stream usage | max tools | system messages |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, p in PROFILES.items():
        server = COMPATIBLE.get(name, _OPENAI)
        cells = [
            f"`{name}`",
            ", ".join(f"`{x}:`" for x in prefixes.get(name, ["openai"])),
            f"`{server.base_url}`",
            f"`{server.base_url_env}`",
            f"`{server.api_key_env}`" if server.api_key_env else "-",
            ", ".join(m for m in ("auto", "required", "named", "none") if m in p.tool_choice),
            "yes" if p.parallel_tool_calls_parameter else "no",
            ("yes" if p.stream_tool_deltas else "no (buffered)")
            + ("" if p.stream_tool_index else ", no index"),
            "yes" if p.strict_schema else "no",
            ", ".join(f"`{k}`" for k in sorted(p.refused_schema_keywords)) or "-",
            f"`{p.reasoning_field}`" if p.reasoning_field else "-",
            "yes" if p.stream_usage else "no",
            str(p.max_tools) if p.max_tools is not None else "-",
            p.system_message,
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def test_the_documented_table_is_the_built_in_profiles() -> None:
    page = (Path(__file__).parents[2] / "docs" / "reference" / "compatible-servers.md").read_text()
    assert profile_table() in page


def test_the_tool_loop_runs_through_a_profiled_model(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentforge_typed import ToolService, tool

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city.

        Args:
            city: The city.
        """
        return f"Sunny in {city}"

    with compatible_server("reject_required", "whole_calls", "no_index") as server:
        monkeypatch.setenv("OLLAMA_BASE_URL", server.url)
        ollama = get_model("ollama:qwen3", max_retries=0)
        events = list(
            ToolService([get_weather]).stream(
                ollama,
                [UserMessage(content="Weather in Paris and London?")],
                ChatRequestParameters(tool_choice=ToolChoice.REQUIRED),
            )
        )
    final = [e for e in events if isinstance(e, ResponseComplete)][-1]
    assert final.response.ai_message.text == "Done."
    first, second = server.requests
    assert "stream" not in first and first["tool_choice"] == "auto"
    assert [m["content"] for m in second["messages"] if m["role"] == "tool"] == [
        "Sunny in Paris",
        "Sunny in London",
    ]
