"""Mistakes a newcomer makes, each caught with a message that says what to do."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Sequence
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    FakeModel,
    FinalResultEvent,
    FunctionModel,
    ModelError,
    OutputCallEvent,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolCallEvent,
    ToolContext,
    ToolResultEvent,
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


def test_every_message_kind_takes_text() -> None:
    assert UserMessage(text="hi") == UserMessage(content="hi")
    assert UserMessage(text="hi").text == "hi"
    assert UserMessage(text="hi").model_dump() == {"role": "user", "content": "hi", "name": None}
    assert SystemMessage(text="be brief").text == "be brief"
    assert AiMessage(text="ok").text == "ok"


def test_user_message_refuses_text_and_content_together_in_one_error() -> None:
    with pytest.raises(ValidationError) as info:
        UserMessage(text="hi", content="ho")  # type: ignore[call-overload]
    assert info.value.error_count() == 1
    assert "takes text= or content=, not both" in str(info.value)
    with pytest.raises(ValidationError, match="takes a string; pass parts as content="):
        UserMessage(text=[TextContent(text="hi")])  # type: ignore[call-overload]


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
    # Not "model called unknown tool": a person approved the call, the run's tools= left it out.
    with pytest.raises(UnknownToolError) as approved:
        service.chat(model, paused.messages, approvals={"r1": True}, tools=["group:orders"])
    assert str(approved.value) == (
        "call 'r1' to 'issue_refund' was approved, but this run's tools= does not offer "
        "'issue_refund' (it offers: get_order); a call the history waits on runs only when its "
        "tool is offered: include 'issue_refund' in tools=, or deny the call"
    )
    assert approved.value.tool_name == "issue_refund"
    with pytest.raises(UnknownToolError) as undecided:
        service.chat(model, paused.messages, tools=["group:orders"])
    assert str(undecided.value).startswith(
        "call 'r1' to 'issue_refund' waits in the history, but this run's tools= does not offer"
    )
    assert str(undecided.value).endswith("include 'issue_refund' in tools=")
    # Denied, it needs no offer: the model reads the denial.
    model = FunctionModel(lambda m, p: AiMessage(text="understood"))
    denied = service.chat(model, paused.messages, approvals={"r1": False}, tools=["group:orders"])
    assert denied.text == "understood"


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


def _counting_model() -> tuple[FunctionModel, list[int]]:
    calls: list[int] = []

    def reply(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        calls.append(len(messages))
        return AiMessage(tool_calls=[ToolCall(id="c1", name="issue_refund", arguments="{}")])

    return FunctionModel(reply), calls


REFUSED = (
    r"ToolService\.{driver}\(\) blocks, and this thread runs an event loop \(async code or a "
    r"notebook\): use `{instead}` there, or ToolService\(blocking_in_event_loop=True\)"
)


async def test_a_blocking_driver_inside_async_code_refuses_before_anything_runs() -> None:
    service = ToolService([get_order, issue_refund])
    model, calls = _counting_model()
    expected = REFUSED.format(driver="chat", instead=r"await service\.achat\(\.\.\.\)")
    with pytest.raises(RuntimeError, match=expected):
        service.chat(model, "refund o1")
    expected = REFUSED.format(
        driver="stream", instead=r"async for event in service\.astream\(\.\.\.\)"
    )
    with pytest.raises(RuntimeError, match=expected):
        next(service.stream(model, "refund o1"))
    assert calls == []
    # Off a loop's thread, the same call runs.
    result = await asyncio.to_thread(lambda: ToolService([get_order]).chat(FakeModel(), "order o1"))
    assert result.tool_executions


async def test_blocking_in_an_event_loop_is_an_explicit_choice() -> None:
    service = ToolService([get_order], blocking_in_event_loop=True)
    result = service.chat(FakeModel(), "order o1")
    assert result.tool_executions[0].result.text
    final = list(service.stream(FakeModel(), "order o1"))[-1]
    assert isinstance(final, FinalResultEvent) and final.result.text == result.text


class Reply(BaseModel):
    answer: str
    ticket: int


def _answers_through_the_output_tool() -> FunctionModel:
    def reply(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        if len(messages) == 1:  # first a call, then an invalid output, then a valid one
            return AiMessage(tool_calls=[ToolCall(id="t", name="get_order", arguments="{}")])
        ticket = '"x"' if len(messages) == 3 else "7"
        arguments = f'{{"answer": "done", "ticket": {ticket}}}'
        return AiMessage(tool_calls=[ToolCall(id="o", name="final_result", arguments=arguments)])

    return FunctionModel(reply)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["stream", "astream"])
async def test_the_output_tool_has_its_own_event(asynchronous: bool) -> None:
    service = ToolService([get_order])
    model = _answers_through_the_output_tool()
    if asynchronous:
        events = [e async for e in service.astream(model, "order?", output_type=Reply)]
    else:
        events = await asyncio.to_thread(
            lambda: list(service.stream(model, "order?", output_type=Reply))
        )
    named = [e.call.name for e in events if isinstance(e, ToolCallEvent)]
    results = [e.execution.call.name for e in events if isinstance(e, ToolResultEvent)]
    assert named == results == ["get_order"]  # the user's tools only
    outputs = [e.execution for e in events if isinstance(e, OutputCallEvent)]
    assert [o.failed for o in outputs] == [True, False]
    assert "$.ticket" in outputs[0].result.text  # what the model read to fix its answer
    final = events[-1]
    assert isinstance(final, FinalResultEvent)
    assert final.result.output == Reply(answer="done", ticket=7)


class Thing:
    """A plain class: pydantic has no schema for it, so its instances cannot become JSON."""


@tool
def make_thing() -> Thing:
    """Make a thing."""
    return Thing()


UNSERIALIZABLE = (
    "its return type Thing cannot be serialized to JSON for the model (Unable to generate "
    "pydantic-core schema for <class 'test_first_hour.Thing'>): return a pydantic model, a "
    "dataclass, a TypedDict or a str, or give @tool a result_converter="
)


def test_a_return_type_that_cannot_be_serialized_is_refused_at_registration() -> None:
    with pytest.raises(TypeError) as info:
        ToolService([get_order, make_thing])
    assert str(info.value) == f"tool 'make_thing': {UNSERIALIZABLE}"
    # A converter of its own answers for the type; a serializable return type passes.

    @tool(result_converter=lambda thing: "a thing")
    def make_described_thing() -> Thing:
        """Make a thing, described in words."""
        return Thing()

    assert ToolService([make_described_thing]).tools == (make_described_thing,)


def test_check_reports_a_return_type_that_cannot_be_serialized(tmp_path: Path) -> None:
    from test_cli import cli

    module = tmp_path / "things.py"
    module.write_text(
        "from agentforge_typed import tool\n\n\n"
        "class Thing:\n    pass\n\n\n"
        "@tool\ndef make_thing(size: int) -> Thing:\n"
        '    """Make a thing.\n\n    Args:\n        size: How big.\n    """\n'
        "    return Thing()\n"
    )
    checked = cli("check", f"{module}:make_thing")
    assert checked.returncode == 1
    assert f"{module}:9: error: make_thing: its return type Thing cannot" in checked.stdout
    assert "result_converter= [unserializable-return]\n1 error, 0 warnings" in checked.stdout
