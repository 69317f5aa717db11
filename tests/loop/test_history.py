"""History processors: what each model call is sent, under every driver; the run keeps the whole
history; a processor that would split a call from its result, fails, or answers nothing sendable
is refused before anything is sent."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from loop_drivers import DRIVERS, drive

from agentforge_typed import (
    AgentForgeError,
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    FunctionModel,
    HistoryProcessorError,
    ImageContent,
    ModelError,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    ToolService,
    UserMessage,
    drop_old_tool_results,
    keep_last_rounds,
    tool,
)


@tool
def lookup(n: int) -> str:
    """Look `n` up."""
    return f"item {n} " + "x" * 40


class Script:
    """Calls `lookup` `rounds` times, one call per answer, then answers with what it was sent last
    (the roles and result texts); records every request's messages."""

    def __init__(self, rounds: int = 3) -> None:
        self.rounds = rounds
        self.sent: list[list[ChatMessage]] = []
        self.model = FunctionModel(self._reply)

    def _reply(
        self, messages: Sequence[ChatMessage], parameters: ChatRequestParameters
    ) -> AiMessage:
        self.sent.append(list(messages))
        done = len(self.sent) - 1
        if done < self.rounds:
            return AiMessage(
                tool_calls=[ToolCall(id=f"c{done}", name="lookup", arguments=f'{{"n": {done}}}')]
            )
        return AiMessage(text=f"{len(messages)} messages")


def _roles(messages: Sequence[ChatMessage]) -> list[str]:
    return [
        f"{m.role}:{m.tool_call_id}" if isinstance(m, ToolResultMessage) else m.role
        for m in messages
    ]


PROMPT: list[ChatMessage] = [
    SystemMessage(text="Be brief."),
    UserMessage(content="look 0, 1 and 2 up"),
]


@pytest.mark.parametrize("driver", DRIVERS)
def test_processors_shape_every_request_and_the_result_keeps_everything(driver: str) -> None:
    script = Script()
    service = ToolService(
        [lookup], history_processors=[drop_old_tool_results(keep=1), keep_last_rounds(2)]
    )
    result = drive(driver, service, script.model, PROMPT)
    assert [_roles(sent) for sent in script.sent] == [
        ["system", "user"],
        ["system", "user", "assistant", "tool:c0"],
        ["system", "user", "assistant", "tool:c0", "assistant", "tool:c1"],
        # Round c0 dropped; of the kept results only the last keeps its text.
        ["system", "user", "assistant", "tool:c1", "assistant", "tool:c2"],
    ]
    last = script.sent[-1]
    assert [m.text for m in last if isinstance(m, ToolResultMessage)] == [
        "[result dropped from the context]",
        "item 2 " + "x" * 40,
    ]
    # The run's history is the whole conversation, every result as the tool returned it.
    assert _roles(result.messages) == [
        "system",
        "user",
        "assistant",
        "tool:c0",
        "assistant",
        "tool:c1",
        "assistant",
        "tool:c2",
        "assistant",
    ]
    assert [m.text for m in result.messages if isinstance(m, ToolResultMessage)] == [
        f"item {n} " + "x" * 40 for n in range(3)
    ]
    assert result.text == "6 messages"


async def _summarise(messages: list[ChatMessage]) -> list[ChatMessage]:
    await asyncio.sleep(0)
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    kept: list[ChatMessage] = [
        m for m in messages if not isinstance(m, (AiMessage, ToolResultMessage))
    ]
    if results:
        kept.append(UserMessage(content=f"(earlier: {len(results)} results)"))
    return kept


@pytest.mark.parametrize("driver", DRIVERS)
def test_an_async_processor_runs_under_every_driver(driver: str) -> None:
    script = Script(rounds=2)
    result = drive(
        driver, ToolService([lookup], history_processors=[_summarise]), script.model, PROMPT
    )
    assert [_roles(sent) for sent in script.sent] == [
        ["system", "user"],
        ["system", "user", "user"],
        ["system", "user", "user"],
    ]
    assert script.sent[-1][-1] == UserMessage(content="(earlier: 2 results)")
    assert len(result.messages) == 7


def _drop_results(messages: list[ChatMessage]) -> list[ChatMessage]:
    return [m for m in messages if not isinstance(m, ToolResultMessage)]


def _drop_answers(messages: list[ChatMessage]) -> list[ChatMessage]:
    return [m for m in messages if not isinstance(m, AiMessage)]


def _keep_orphans(messages: list[ChatMessage]) -> list[ChatMessage]:
    return messages


def test_a_history_split_before_the_processor_is_not_blamed_on_it() -> None:
    orphan = ToolResultMessage(tool_call_id="old", tool_name="lookup", text="item")
    script = Script(rounds=0)
    service = ToolService([lookup], history_processors=[_keep_orphans])
    result = service.chat(script.model, [*PROMPT, orphan])
    assert script.sent == [[*PROMPT, orphan]]
    assert result.text == "3 messages"


def _raises(messages: list[ChatMessage]) -> list[ChatMessage]:
    raise KeyError("summary")


async def _araises(messages: list[ChatMessage]) -> list[ChatMessage]:
    raise RuntimeError("summariser offline")


def _model_fails(messages: list[ChatMessage]) -> list[ChatMessage]:
    raise ModelError("the summarising model answered 503", 503)


def _empty(messages: list[ChatMessage]) -> list[ChatMessage]:
    return []


def _text(messages: list[ChatMessage]) -> str:
    return "hello"


def _not_messages(messages: list[ChatMessage]) -> list[object]:
    return [*messages, {"role": "user", "content": "hi"}]


SPLIT = "history processor `{}` would split a tool call from its result: "


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize(
    ("processor", "message", "rounds"),
    [
        (
            _drop_results,
            SPLIT.format("_drop_results") + "the call 'c0' (`lookup`) is kept without its result",
            1,
        ),
        (
            _drop_answers,
            SPLIT.format("_drop_answers") + "messages[2] is the result of call 'c0' (`lookup`) "
            "without the assistant message that made the call",
            1,
        ),
        (_raises, "history processor `_raises` raised KeyError: 'summary'", 0),
        (_araises, "history processor `_araises` raised RuntimeError: summariser offline", 0),
        (
            _empty,
            "history processor `_empty` returned no messages; a model call needs at least one",
            0,
        ),
        (_text, "history processor `_text` returned a str, not a list of messages", 0),
        (
            _not_messages,
            "history processor `_not_messages` returned messages[2], a dict, not a chat message",
            0,
        ),
    ],
)
def test_a_failing_or_unsendable_processor_fails_the_run_before_sending(
    driver: str, processor: object, message: str, rounds: int
) -> None:
    script = Script()
    service = ToolService([lookup], history_processors=[processor])  # type: ignore[list-item]
    with pytest.raises(HistoryProcessorError) as raised:
        drive(driver, service, script.model, PROMPT)
    assert str(raised.value) == message
    assert raised.value.processor == f"`{processor.__qualname__}`"  # type: ignore[attr-defined]
    # Nothing was sent after the processor failed; the error carries the whole history.
    assert len(script.sent) == rounds
    expected = ["system", "user", "assistant", "tool:c0"] if rounds else ["system", "user"]
    assert _roles(raised.value.messages) == expected


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_package_error_inside_a_processor_passes_as_it_is(driver: str) -> None:
    service = ToolService([lookup], history_processors=[_model_fails])
    with pytest.raises(ModelError) as raised:
        drive(driver, service, Script().model, PROMPT)
    assert str(raised.value) == "the summarising model answered 503"
    assert raised.value.messages == tuple(PROMPT)


def test_a_processor_that_is_not_callable_is_refused_when_the_service_is_built() -> None:
    with pytest.raises(TypeError) as raised:
        ToolService(history_processors=[keep_last_rounds(1), 3])  # type: ignore[list-item]
    assert str(raised.value) == (
        "history_processors[1] is a int, not a function taking and returning a list of messages"
    )


def test_processors_edit_a_copy_never_the_run_s_history() -> None:
    def clear(messages: list[ChatMessage]) -> list[ChatMessage]:
        kept = messages[:2]
        messages.clear()  # the list is the processor's own
        return kept

    script = Script(rounds=1)
    result = ToolService([lookup], history_processors=[clear]).chat(script.model, PROMPT)
    assert _roles(result.messages) == ["system", "user", "assistant", "tool:c0", "assistant"]
    assert [len(sent) for sent in script.sent] == [2, 2]


# -- the ready processors ---------------------------------------------------------------------


def _call(call_id: str) -> AiMessage:
    return AiMessage(tool_calls=[ToolCall(id=call_id, name="lookup", arguments="{}")])


def _result(call_id: str) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call_id, tool_name="lookup", text=f"r{call_id}")


def test_keep_last_rounds_keeps_the_start_and_each_kept_answer_s_question() -> None:
    system, u1, u2, u3 = (
        SystemMessage(text="s"),
        UserMessage(content="1"),
        UserMessage(content="2"),
        UserMessage(content="3"),
    )
    a1, a2 = AiMessage(text="a1"), AiMessage(text="a2")
    chat: list[ChatMessage] = [system, u1, a1, u2, a2, u3]
    assert keep_last_rounds(1)(list(chat)) == [system, u1, u2, a2, u3]
    assert keep_last_rounds(2)(list(chat)) == chat
    assert keep_last_rounds(5)(list(chat)) == chat
    loop: list[ChatMessage] = [u1, _call("a"), _result("a"), _call("b"), _result("b"), _call("c")]
    loop.append(_result("c"))
    assert keep_last_rounds(1)(list(loop)) == [u1, _call("c"), _result("c")]
    # Without a user message the start is empty: only the last rounds are kept.
    assert keep_last_rounds(1)(loop[1:]) == [_call("c"), _result("c")]
    assert keep_last_rounds.__name__ == "keep_last_rounds"
    assert keep_last_rounds(4).__qualname__ == "keep_last_rounds(4)"


@pytest.mark.parametrize("rounds", [0, -1, True, 1.5])
def test_keep_last_rounds_needs_a_whole_number_of_rounds(rounds: object) -> None:
    with pytest.raises(ValueError) as raised:
        keep_last_rounds(rounds)  # type: ignore[arg-type]
    assert str(raised.value) == (
        f"keep_last_rounds needs a whole number of rounds >= 1, got {rounds!r}"
    )


def test_drop_old_tool_results_keeps_every_call_and_the_last_results() -> None:
    history: list[ChatMessage] = [UserMessage(content="go")]
    for call_id in "abc":
        history += [_call(call_id), _result(call_id)]

    def texts(messages: Sequence[ChatMessage]) -> list[str]:
        return [m.text for m in messages if isinstance(m, ToolResultMessage)]

    assert texts(drop_old_tool_results(1)(list(history))) == [
        "[result dropped from the context]",
        "[result dropped from the context]",
        "rc",
    ]
    assert texts(drop_old_tool_results(0, placeholder="-")(list(history))) == ["-", "-", "-"]
    assert texts(drop_old_tool_results(5)(list(history))) == ["ra", "rb", "rc"]
    assert _roles(drop_old_tool_results(0)(list(history))) == _roles(history)


def test_drop_old_tool_results_needs_keep_of_zero_or_more() -> None:
    with pytest.raises(ValueError) as raised:
        drop_old_tool_results(-1)
    assert str(raised.value) == "drop_old_tool_results needs keep >= 0, got -1"


def test_the_error_is_an_agentforge_error() -> None:
    assert issubclass(HistoryProcessorError, AgentForgeError)


def test_drop_old_tool_results_drops_their_content_parts_too() -> None:
    shot = ImageContent(data=b"\x89PNG" * 4, media_type="image/png")
    history: list[ChatMessage] = [UserMessage(content="go")]
    for call_id in "ab":
        history += [
            _call(call_id),
            ToolResultMessage(tool_call_id=call_id, tool_name="t", content=[shot]),
        ]
    dropped = drop_old_tool_results(1)(list(history))
    old, last = [m for m in dropped if isinstance(m, ToolResultMessage)]
    assert (old.text, old.content) == ("[result dropped from the context]", ())
    assert last.content == (shot,)
