"""Mistakes a newcomer makes, each caught with a message that says what to do."""

from __future__ import annotations

import socket

import pytest
from pydantic import ValidationError

from agentforge_typed import (
    AiMessage,
    FakeModel,
    FunctionModel,
    ModelError,
    ToolCall,
    ToolContext,
    ToolService,
    UnknownToolError,
    UserMessage,
    get_model,
    tool,
)


@tool
def get_order(order_id: str) -> str:
    """Look an order up."""
    return order_id


@tool(requires_approval=True)
def issue_refund(order_id: str) -> str:
    """Refund an order."""
    return f"refunded {order_id}"


def test_user_message_with_text_says_content_in_one_error() -> None:
    with pytest.raises(ValidationError) as info:
        UserMessage(text="hi")  # type: ignore[call-arg]
    assert info.value.error_count() == 1
    assert "UserMessage takes content=, not text=" in str(info.value)
    assert UserMessage(content="hi").text == "hi"


def test_a_bare_string_as_tools_says_to_pass_a_list() -> None:
    service = ToolService(groups={"orders": [get_order]})
    with pytest.raises(TypeError, match=r"not a string: pass \['group:orders'\]"):
        service.chat(FakeModel(), "hi", tools="group:orders")


def test_a_server_not_listening_is_named_in_the_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # free, and nothing listens on it once closed
    model = get_model("ollama:qwen3", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    with pytest.raises(ModelError) as info:
        ToolService().chat(model, "hi")
    # The server the user chose, by the name they chose it by, and where it was looked for.
    assert str(info.value).startswith(
        f"ollama request to http://127.0.0.1:{port} failed: ConnectError"
    )


def test_a_call_the_history_waits_on_but_the_run_does_not_offer_says_so() -> None:
    service = ToolService(groups={"orders": [get_order], "refunds": [issue_refund]})
    model = FunctionModel(
        lambda m, p: AiMessage(
            tool_calls=[ToolCall(id="r1", name="issue_refund", arguments='{"order_id": "A"}')]
        )
    )
    paused = service.chat(model, "refund A")
    assert [p.call.id for p in paused.pending] == ["r1"]
    with pytest.raises(UnknownToolError, match="registered but this run's tools= does not offer"):
        service.chat(model, paused.messages, approvals={"r1": True}, tools=["group:orders"])


def test_resuming_without_decisions_says_the_run_paused_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    service = ToolService([issue_refund])
    call = ToolCall(id="r1", name="issue_refund", arguments='{"order_id": "A"}')
    paused = service.chat(FunctionModel(lambda m, p: AiMessage(tool_calls=[call])), "refund A")
    again = service.chat(FakeModel(), paused.messages)
    assert again.text is None and [p.call.id for p in again.pending] == ["r1"]
    assert "paused again without calling the model: 1 call(s) still wait" in caplog.text


def test_the_cli_has_a_version_and_lists_the_tools_a_typo_missed() -> None:
    from test_cli import cli

    version = cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("agentforge-typed 0.")
    typo = cli("run", "examples/weather.py:tools", "hi", "--tools", "get_wether")
    assert typo.returncode == 2
    assert "tools: get_weather, get_forecast" in typo.stderr


class Db:
    """What a tool needs to run."""


@tool
def balance(ctx: ToolContext[Db], account: str) -> str:
    """An account's balance."""
    return "100"


def test_a_run_without_the_deps_its_tools_need_is_refused_before_the_model() -> None:
    calls: list[object] = []

    def reply(messages: object, parameters: object) -> AiMessage:
        calls.append(messages)
        return AiMessage(text="never")

    with pytest.raises(TypeError, match=r"balance \(ToolContext\[Db\]\) needs deps: pass deps="):
        ToolService([balance]).chat(FunctionModel(reply), "balance?")
    assert calls == []
    # With deps, or a selection that leaves the tool out, the run goes on.
    assert (
        ToolService([balance], deps_type=Db).chat(FunctionModel(reply), "hi", deps=Db()).text
        == "never"
    )
    assert (
        ToolService([balance, get_order]).chat(FunctionModel(reply), "hi", tools=["get_order"]).text
        == "never"
    )
