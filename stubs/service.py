"""Static-typing contract of ToolService: the output type flows into the result, a
`FinishedChatResult[T]` or a `PausedChatResult[T]` told apart by `result.paused`."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Generator, Sequence
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, Field
from typing_extensions import Unpack, assert_type

from agentforge_typed import (
    AgentForgeError,
    AiMessage,
    ChatMessage,
    ChatRequest,
    ChatRequestParameters,
    FinalResultEvent,
    FunctionModel,
    RunOptions,
    ToolChatResult,
    ToolContext,
    ToolExecution,
    ToolLoopEvent,
    ToolService,
    UserMessage,
    tool,
)
from agentforge_typed.loop import (
    FinishedChatResult,
    HistoryProcessor,
    HistoryProcessorError,
    OutputSpec,
    PausedChatResult,
    ToolProgressEvent,
    drop_old_tool_results,
    keep_last_rounds,
)
from agentforge_typed.providers import TokenUsage
from agentforge_typed.stores import ConversationStore, MemoryStore


class City(BaseModel):
    name: str


@dataclass
class Point:
    x: float


def reply(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
    return AiMessage(text="hi")


async def main() -> None:
    service = ToolService()
    model = FunctionModel(reply)
    prompt = [UserMessage(content="hi")]

    plain = service.chat(model, prompt)
    assert_type(plain, FinishedChatResult[None] | PausedChatResult[None])
    assert_type(plain.output, None)
    assert_type(plain.text, str | None)
    assert_type(plain.tool_executions[0], ToolExecution)
    general: ToolChatResult[None] = plain  # both kinds are results

    # A run may pause (a call awaiting approval): then it has no output, and says so.
    city = service.chat(model, prompt, output_type=City)
    assert_type(city, FinishedChatResult[City] | PausedChatResult[City])
    assert_type(city.output, City | None)
    city.output.name  # type: ignore[union-attr]
    if city.paused:
        assert_type(city, PausedChatResult[City])
        assert_type(city.output, None)
    else:
        assert_type(city, FinishedChatResult[City])
        assert_type(city.output.name, str)
    assert_type(city.paused, bool)
    assert not city.paused
    assert_type(city.output, City)
    assert_type(general.paused, bool)
    assert_type(general.output, None)

    point = await service.achat(model, prompt, output_type=Point)
    assert not point.paused
    assert_type(point.output, Point)
    ints = service.chat(model, prompt, output_type=list[int])
    assert not ints.paused
    assert_type(ints.output, list[int])
    native = service.chat(model, prompt, output_type=OutputSpec(City, native=True))
    assert not native.paused
    assert_type(native.output, City)

    # Type forms that are not classes: unions, literals, `Annotated`, `Optional`.
    either = service.chat(model, prompt, output_type=City | Point)
    assert_type(either.output, City | Point | None)
    assert not either.paused
    assert_type(either.output, City | Point)
    yes_no = service.chat(model, prompt, output_type=Literal["yes", "no"])
    assert not yes_no.paused
    assert_type(yes_no.output, Literal["yes", "no"])
    count = service.chat(model, prompt, output_type=Annotated[int, Field(ge=0)])
    assert not count.paused
    assert_type(count.output, int)
    assert_type((await service.achat(model, prompt, output_type=City | None)).output, City | None)
    assert_type(OutputSpec(City | Point), OutputSpec[City | Point])
    assert_type(OutputSpec(Literal["a", "b"], native=True), OutputSpec[Literal["a", "b"]])
    prompted = service.chat(model, prompt, output_type=OutputSpec(City, prompted=True))
    assert not prompted.paused
    assert_type(prompted.output, City)
    OutputSpec(City, prompted="yes")  # type: ignore[arg-type]
    spec_either = service.chat(model, prompt, output_type=OutputSpec(City | Point))
    assert not spec_either.paused
    assert_type(spec_either.output, City | Point)
    either.output.name  # type: ignore[union-attr]
    answer: Literal["yes"] = yes_no.output  # type: ignore[assignment]
    service.chat(model, prompt, output_type=42)  # type: ignore[call-overload]
    OutputSpec(42)  # type: ignore[arg-type]

    # A string is one user message.
    assert_type(service.chat(model, "What's the weather?"), FinishedChatResult[None] | PausedChatResult[None])
    assert_type(await service.achat(model, "hi", output_type=City), FinishedChatResult[City] | PausedChatResult[City])

    # Generators, so that closing one early (which cancels running calls) type-checks.
    assert_type(service.stream(model, prompt), Generator[ToolLoopEvent[None], None, None])
    assert_type(service.astream(model, prompt), AsyncGenerator[ToolLoopEvent[None], None])
    assert_type(
        service.stream(model, prompt, output_type=City | Point),
        Generator[ToolLoopEvent[City | Point], None, None],
    )
    # Streams carry the output type to the final result, as `chat` does.
    for event in service.stream(model, prompt, output_type=City):
        if isinstance(event, FinalResultEvent) and not event.result.paused:
            assert_type(event.result.output, City)
    async for streamed in service.astream(model, prompt, output_type=OutputSpec(Point)):
        if isinstance(streamed, FinalResultEvent):
            assert_type(streamed.result.output, Point | None)
    any_run: Generator[ToolLoopEvent, None, None] = service.stream(model, prompt, output_type=City)
    service.astream(model, prompt, output_type=Literal["a"])
    service.stream(model, prompt, output_type=42)  # type: ignore[call-overload]

    # Misuse that must stay a type error.
    city.output.population  # type: ignore[attr-defined]
    service.chat(model, ["hi"])  # type: ignore[list-item]
    service.chat(model, 42)  # type: ignore[call-overload]
    city.output.name.upper(1)  # type: ignore[call-arg]
    service.chat(prompt, model)  # type: ignore[call-overload]
    ToolService(max_round_trips="3")  # type: ignore[arg-type]
    ToolService(max_result_chars=20_000)
    ToolService(max_result_chars="20k")  # type: ignore[arg-type]

    # The run options (`RunOptions`): a misspelt one or a wrong type stays an error.
    service.chat(model, prompt, conversation="c")  # type: ignore[call-overload]
    await service.achat(model, prompt, usage_limit=None)  # type: ignore[call-overload]
    service.stream(model, prompt, tool=["a"])  # type: ignore[call-overload]
    service.chat(model, prompt, conversation_id=7)  # type: ignore[call-overload]
    service.astream(model, prompt, usage_limits=5)  # type: ignore[call-overload]
    assert_type(ask(service, "hi", conversation_id="c", tools=["a"]), str | None)
    ask(service, "hi", conversation_idd="c")  # type: ignore[call-arg]
    ask(service, "hi", tools=7)  # type: ignore[arg-type]


async def stored(model: FunctionModel) -> None:
    # A store (or its URL): a run given a conversation id continues it, or resumes it with no new
    # input; the result's type is the same as without a store.
    service = ToolService(store=MemoryStore())
    ToolService(store="sqlite:///conversations.db")
    ToolService(store=7)  # type: ignore[arg-type]
    assert_type(service.store, ConversationStore | None)
    service.store = "memory:"
    service.store = None
    assert_type(service.chat(model, "Refund order 42", conversation_id="c-17"), FinishedChatResult[None] | PausedChatResult[None])
    resumed = service.chat(model, conversation_id="c-17", approvals={"call_1": True})
    assert_type(resumed, FinishedChatResult[None] | PausedChatResult[None])
    assert_type(await service.achat(model, None, conversation_id="c-17"), FinishedChatResult[None] | PausedChatResult[None])
    assert_type(service.chat(model, conversation_id="c-17", output_type=City).output, City | None)
    assert_type(
        service.stream(model, conversation_id="c-17"), Generator[ToolLoopEvent[None], None, None]
    )
    assert_type(
        service.astream(model, conversation_id="c-17"), AsyncGenerator[ToolLoopEvent[None], None]
    )
    service.chat(model, conversation_id=17)  # type: ignore[call-overload]


def ask(service: ToolService[None], prompt: str, **options: Unpack[RunOptions]) -> str | None:
    """A wrapper forwards the run options typed."""
    model = FunctionModel(reply)
    return service.chat(model, prompt, **options).text


def failed(error: AgentForgeError) -> None:
    # An error escaping a run carries the run so far.
    assert_type(error.messages, tuple[ChatMessage, ...])
    assert_type(error.tool_executions, tuple[ToolExecution, ...])
    assert_type(error.usage, TokenUsage)


class Db:
    def user(self) -> str:
        return "ada"


class Other:
    pass


async def typed_deps(model: FunctionModel) -> None:
    # The deps type: inferred from `deps_type`, or annotated; none by default.
    typed = ToolService(deps_type=Db)
    assert_type(typed, ToolService[Db])
    assert_type(typed.deps_type, type[Db] | None)
    annotated: ToolService[Db] = ToolService()
    assert_type(ToolService(), ToolService[None])
    assert_type(ToolService().register(get_user), ToolService[None])

    assert_type(typed.chat(model, "hi", deps=Db()), FinishedChatResult[None] | PausedChatResult[None])
    assert_type(
        typed.chat(model, "hi", deps=Db(), output_type=City | Point).output, City | Point | None
    )
    assert_type(typed.chat(model, "hi", deps=Db(), output_type=OutputSpec(int)).output, int | None)
    assert_type(await annotated.achat(model, "hi", deps=Db(), output_type=City), FinishedChatResult[City] | PausedChatResult[City])
    assert_type(typed.stream(model, "hi", deps=Db()), Generator[ToolLoopEvent[None], None, None])
    assert_type(
        typed.astream(model, "hi", deps=Db(), output_type=City),
        AsyncGenerator[ToolLoopEvent[City], None],
    )
    optional: ToolService[Db | None] = ToolService()
    optional.chat(model, "hi", deps=None)
    ToolService().chat(model, "hi", deps=None)

    # A missing or wrong `deps` is a type error.
    typed.chat(model, "hi")  # type: ignore[call-overload]
    typed.chat(model, "hi", deps=Other())  # type: ignore[call-overload]
    await typed.achat(model, "hi", deps=None)  # type: ignore[call-overload]
    typed.stream(model, "hi")  # type: ignore[call-overload]
    typed.astream(model, "hi", deps="db")  # type: ignore[call-overload]
    typed.chat(model, "hi", deps=Db(), conversation="c")  # type: ignore[call-overload]
    typed.stream(model, "hi", deps=Db(), usage_limits=5)  # type: ignore[call-overload]
    ToolService().chat(model, "hi", deps=Db())  # type: ignore[call-overload]
    wrong: ToolService[Db] = ToolService(deps_type=Other)  # type: ignore[arg-type]


@tool
def get_user(ctx: ToolContext[Db]) -> str:
    ctx.report_progress(1, 2, "looking the user up")
    ctx.report_progress(0.5)
    ctx.report_progress("half")  # type: ignore[arg-type]
    return ctx.deps.user()


def history_processors() -> None:
    """History processors: sync or async functions from a list of messages to messages."""

    def keep_two(messages: list[ChatMessage]) -> list[ChatMessage]:
        return messages[-2:]

    async def summarise(messages: list[ChatMessage]) -> Sequence[ChatMessage]:
        return messages

    ready = keep_last_rounds(3)
    assert_type(ready([]), list[ChatMessage])
    assert_type(drop_old_tool_results(keep=1, placeholder="-")([]), list[ChatMessage])
    processors: list[HistoryProcessor] = [keep_two, summarise, ready]
    ToolService(history_processors=processors)
    ToolService(history_processors=(keep_two, drop_old_tool_results()))

    def to_text(messages: list[ChatMessage]) -> str:
        return "no"

    def takes_text(text: str) -> list[ChatMessage]:
        return []

    ToolService(history_processors=[to_text])  # type: ignore[list-item]
    ToolService(history_processors=[takes_text])  # type: ignore[list-item]
    keep_last_rounds("3")  # type: ignore[arg-type]
    try:
        ToolService().chat(FunctionModel(reply), "hi")
    except HistoryProcessorError as error:
        assert_type(error.processor, str)


def fallback_models() -> None:
    """`FallbackModel` is a `ChatModel`; `fallback_on` takes a `ModelError`."""
    from agentforge_typed import ChatModel, FallbackModel, ModelError
    from agentforge_typed.providers import AllModelsFailedError

    model = FallbackModel(FunctionModel(reply), FunctionModel(reply))
    usable: ChatModel = model
    assert_type(model.models, tuple[ChatModel, ...])
    assert_type(FallbackModel.is_transient(ModelError("x")), bool)
    FallbackModel(model, fallback_on=lambda error: error.status_code == 400)
    ToolService().chat(model, "hi")
    try:
        model.chat(ChatRequest(messages=[UserMessage(content="hi")]))
    except AllModelsFailedError as error:
        assert_type(error.errors, tuple[ModelError, ...])
    FallbackModel()  # type: ignore[call-arg]
    FallbackModel(model, fallback_on=lambda error: error.nope)  # type: ignore[attr-defined]
    FallbackModel("openai:gpt-4o")  # type: ignore[arg-type]


def progress_of(event: ToolLoopEvent) -> float | None:
    if isinstance(event, ToolProgressEvent):
        assert_type(event.total, float | None)
        return event.progress
    return None
