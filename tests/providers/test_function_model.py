from __future__ import annotations

from collections.abc import Sequence

import pytest

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatModel,
    ChatRequest,
    ChatRequestParameters,
    ChatResponse,
    FinishReason,
    FunctionModel,
    ResponseComplete,
    TextDelta,
    ThinkingDelta,
    TokenUsage,
    ToolCall,
    ToolCallDelta,
    UserMessage,
)

REQUEST = ChatRequest(
    messages=[UserMessage(content="hi")], parameters=ChatRequestParameters(temperature=0.5)
)


def scripted(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
    assert parameters.temperature == 0.5
    return AiMessage(
        text=f"You said {len(messages)} thing(s).",
        thinking="Count the messages.",
        tool_calls=[
            ToolCall(id="a", name="one", arguments='{"x": 1}'),
            ToolCall(id="b", name="two", arguments="{}"),
        ],
    )


async def ascripted(
    messages: Sequence[ChatMessage], parameters: ChatRequestParameters
) -> AiMessage:
    return scripted(messages, parameters)


@pytest.mark.parametrize("fn", [scripted, ascripted])
def test_chat_sync_and_async_functions(fn: object) -> None:
    model = FunctionModel(fn)  # type: ignore[arg-type]
    assert isinstance(model, ChatModel)
    response = model.chat(REQUEST)
    assert response.ai_message == scripted(REQUEST.messages, REQUEST.parameters)  # type: ignore[arg-type]
    assert response.finish_reason is FinishReason.TOOL_EXECUTION


@pytest.mark.parametrize("fn", [scripted, ascripted])
async def test_achat(fn: object) -> None:
    model = FunctionModel(fn)  # type: ignore[arg-type]
    response = await model.achat(REQUEST)
    assert response.ai_message == scripted(REQUEST.messages, REQUEST.parameters)  # type: ignore[arg-type]
    assert response.finish_reason is FinishReason.TOOL_EXECUTION


async def test_sync_chat_of_async_function_inside_a_loop_runs_like_an_async_tool() -> None:
    # One policy for blocking code under a running loop (see `_sync.run_sync`): the async function
    # runs on a fresh loop in a worker thread, as an async tool under `execute` does.
    response = FunctionModel(ascripted).chat(REQUEST)
    assert response.ai_message == scripted(REQUEST.messages, REQUEST.parameters)  # type: ignore[arg-type]


@pytest.mark.parametrize("fn", [scripted, ascripted])
def test_stream_emits_deltas_then_the_blocking_response(fn: object) -> None:
    model = FunctionModel(fn)  # type: ignore[arg-type]
    events = list(model.stream(REQUEST))
    assert isinstance(events[-1], ResponseComplete)
    assert events[-1].response == model.chat(REQUEST)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "You said 1 thing(s)."
    assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)) == "Count the messages."
    assert len([e for e in events if isinstance(e, TextDelta)]) > 1
    calls = [e for e in events if isinstance(e, ToolCallDelta)]
    assert calls == [
        ToolCallDelta(index=0, id="a", name="one", arguments_delta='{"x": 1}'),
        ToolCallDelta(index=1, id="b", name="two", arguments_delta="{}"),
    ]
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("ThinkingDelta") < kinds.index("TextDelta") < kinds.index("ToolCallDelta")


@pytest.mark.parametrize("fn", [scripted, ascripted])
async def test_astream(fn: object) -> None:
    model = FunctionModel(fn)  # type: ignore[arg-type]
    events = [event async for event in model.astream(REQUEST)]
    assert isinstance(events[-1], ResponseComplete)
    assert events[-1].response == await model.achat(REQUEST)
    assert len(events) > 3


def test_full_chat_response_passes_through() -> None:
    response = ChatResponse(
        ai_message=AiMessage(text="cut"),
        finish_reason=FinishReason.LENGTH,
        token_usage=TokenUsage(input_tokens=1, output_tokens=2, total_tokens=3),
        metadata={"id": "x"},
    )
    model = FunctionModel(lambda messages, parameters: response)
    assert model.chat(ChatRequest(messages=[UserMessage(content="hi")])) is response
    plain = FunctionModel(lambda messages, parameters: AiMessage(text="done"))
    assert plain.chat(REQUEST).finish_reason is FinishReason.STOP


def test_parameters_default_to_empty() -> None:
    seen: list[ChatRequestParameters] = []

    def fn(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        seen.append(parameters)
        return AiMessage(text="ok")

    FunctionModel(fn).chat(ChatRequest(messages=[UserMessage(content="hi")]))
    assert seen == [ChatRequestParameters()]


def test_a_given_name_is_shown_in_the_repr_and_the_fallback_metadata() -> None:
    from agentforge_typed import FallbackModel, ModelError

    def overloaded(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        raise ModelError("overloaded", 529)

    primary, backup = FunctionModel(overloaded, name="primary"), FunctionModel(scripted)
    assert repr(primary) == "FunctionModel('overloaded', name='primary')"
    assert repr(backup) == "FunctionModel('scripted')"  # the default name is not shown
    model = FallbackModel(primary, backup)
    assert repr(model) == (
        "FallbackModel(FunctionModel('overloaded', name='primary'), FunctionModel('scripted'))"
    )
    fallback = model.chat(REQUEST).metadata["fallback"]
    assert fallback["model"] == "FunctionModel('scripted')"
    assert fallback["failed"][0]["model"] == "FunctionModel('overloaded', name='primary')"
