"""`FakeModel` and the argument synthesis behind it."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import ipaddress
import re
import uuid
from typing import Annotated, Any, Literal, TypeAlias

import pydantic_core
import pytest
from pydantic import (
    UUID1,
    UUID4,
    UUID5,
    AnyUrl,
    AwareDatetime,
    BaseModel,
    Field,
    HttpUrl,
    create_model,
)
from typing_extensions import NotRequired, TypedDict

from agentforge_typed import (
    AiMessage,
    ChatModel,
    ChatRequest,
    ChatRequestParameters,
    FakeModel,
    ImageContent,
    ModelError,
    ResponseComplete,
    TextContent,
    TextDelta,
    Tool,
    ToolCall,
    ToolCallDelta,
    ToolChoice,
    ToolResultMessage,
    ToolService,
    ToolSpecification,
    UserMessage,
    tool,
)
from agentforge_typed.providers._synthesize import synthesize_arguments

# -- models of every kind, for synthesis ---------------------------------------------------------


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 10
    HIGH = 20


class Address(BaseModel):
    street: str = Field(min_length=3)
    zip_code: str = Field(pattern=r"^\d{5}(-\d{4})?$")
    country: Literal["DE", "FR"] = "DE"


class LineItem(BaseModel):
    sku: str = Field(pattern=r"^[A-Z]{3}-\d{4}$")
    quantity: int = Field(ge=1, le=99)
    price: decimal.Decimal = Field(gt=0, max_digits=6, decimal_places=2)


class Order(BaseModel):
    id: uuid.UUID
    address: Address
    items: list[LineItem] = Field(min_length=2, max_length=5)
    gift: bool = False
    note: str | None = None


@dataclasses.dataclass
class Point:
    x: float
    y: float = 0.0


class Filters(TypedDict):
    city: str
    radius_km: NotRequired[Annotated[float, Field(gt=0, le=50)]]


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int = Field(9, ge=1, le=9)


class Dog(BaseModel):
    kind: Literal["dog"]
    name: str


# Named, so that mypy reads the strings inside as literals rather than as string annotations
# where `create_model` takes a type form.
Unit: TypeAlias = Literal["c", "f"]
AutoOrZero: TypeAlias = Literal["auto", 0]
TaggedPet: TypeAlias = Annotated[Cat | Dog, Field(discriminator="kind")]


class Node(BaseModel):
    value: int
    children: list[Node] = []


class Category(BaseModel):
    name: str
    parent: Category | None = None


class Employee(BaseModel):
    name: str
    manager: Manager | None = None


class Manager(BaseModel):
    name: str
    reports: list[Employee] = Field(default_factory=list)


MODELS: dict[str, type[BaseModel]] = {
    "scalars": create_model("scalars", s=(str, ...), i=(int, ...), f=(float, ...), b=(bool, ...)),
    "int_bounds": create_model(
        "int_bounds",
        a=(int, Field(ge=5)),
        b=(int, Field(gt=5, lt=7)),
        c=(int, Field(le=-3)),
        d=(int, Field(multiple_of=7, ge=20, le=40)),
        e=(int, Field(lt=0, multiple_of=4)),
    ),
    "float_bounds": create_model(
        "float_bounds",
        a=(float, Field(gt=0, lt=1)),
        b=(float, Field(ge=100.5)),
        c=(float, Field(lt=-10)),
        d=(float, Field(multiple_of=0.25, gt=2)),
        e=(float, Field(ge=3, le=3)),
    ),
    "strings": create_model(
        "strings",
        a=(str, Field(min_length=12)),
        b=(str, Field(max_length=3)),
        c=(str, Field(pattern=r"^[a-z]+_[0-9]{2,4}$", min_length=6)),
        d=(str, Field(pattern=r"^(red|green)\.(png|jpg)$")),
        e=(bytes, ...),
    ),
    "enums": create_model(
        "enums",
        color=(Color, ...),
        level=(Level, Level.HIGH),
        unit=(Unit, ...),
        flag=(Literal[True], ...),
        mixed=(AutoOrZero, ...),
    ),
    "ids_and_urls": create_model(
        "ids_and_urls",
        a=(uuid.UUID, ...),
        b=(UUID1, ...),
        c=(UUID4, ...),
        d=(UUID5, ...),
        url=(AnyUrl, ...),
        http=(HttpUrl, ...),
        ip=(ipaddress.IPv4Address, ...),
        ip6=(ipaddress.IPv6Address, ...),
    ),
    "times": create_model(
        "times",
        at=(dt.datetime, ...),
        aware=(AwareDatetime, ...),
        day=(dt.date, ...),
        clock=(dt.time, ...),
        wait=(dt.timedelta, ...),
    ),
    "decimals": create_model(
        "decimals",
        a=(decimal.Decimal, ...),
        b=(decimal.Decimal, Field(ge=10, le=20, decimal_places=0)),
    ),
    "collections": create_model(
        "collections",
        ids=(list[int], Field(min_length=3)),
        tags=(set[str], Field(min_length=3)),
        codes=(frozenset[Level], Field(min_length=2)),
        rgb=(tuple[int, int, int], ...),
        pair=(tuple[str, float], ...),
        rest=(tuple[int, ...], ...),
    ),
    "dicts": create_model(
        "dicts",
        counts=(dict[str, int], ...),
        by_id=(dict[int, str], ...),
        addresses=(dict[str, Address], ...),
    ),
    "nested": create_model("nested", order=(Order, ...)),
    "dataclass_typeddict": create_model(
        "dataclass_typeddict", point=(Point, ...), filters=(Filters, ...)
    ),
    "unions": create_model(
        "unions",
        key=(int | str, ...),
        pet=(Cat | Dog, ...),
        tagged=(TaggedPet, ...),
        maybe=(Address | None, None),
        required_nullable=(int | None, ...),
    ),
    "recursive_root": Node,
    "recursive_optional": Category,
    "mutual_recursion": create_model("mutual_recursion", boss=(Manager, ...)),
    "everything_optional": create_model(
        "everything_optional",
        a=(str, "x"),
        b=(list[Order], []),
        c=(Color | None, None),
        d=(dt.date | None, None),
    ),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_synthesized_arguments_validate_strictly(name: str) -> None:
    model = MODELS[name]
    arguments = synthesize_arguments(model.model_json_schema())
    model.model_validate_json(pydantic_core.to_json(arguments), strict=True)
    assert set(arguments) == set(model.model_fields)  # optional properties are filled in too
    assert synthesize_arguments(model.model_json_schema()) == arguments  # deterministic


def test_synthesis_honours_bounds_formats_and_patterns() -> None:
    assert synthesize_arguments(MODELS["int_bounds"].model_json_schema()) == {
        "a": 5,
        "b": 6,
        "c": -3,
        "d": 21,
        "e": -4,
    }
    floats = synthesize_arguments(MODELS["float_bounds"].model_json_schema())
    assert floats == {"a": 0.5, "b": 101, "c": -11, "d": 2.25, "e": 3}
    strings = synthesize_arguments(MODELS["strings"].model_json_schema())
    assert strings == {
        "a": "examplexxxxx",
        "b": "exa",
        "c": "aaaa_0000",
        "d": "red.png",
        "e": "example",
    }
    times = synthesize_arguments(MODELS["times"].model_json_schema())
    assert times == {
        "at": "2024-01-15T09:30:00Z",
        "aware": "2024-01-15T09:30:00Z",
        "day": "2024-01-15",
        "clock": "09:30:00",
        "wait": "PT1H30M",
    }
    ids = MODELS["ids_and_urls"].model_validate_json(
        pydantic_core.to_json(synthesize_arguments(MODELS["ids_and_urls"].model_json_schema())),
        strict=True,
    )
    fields = dict(ids)  # a model built at run time: its fields are unknown to mypy
    assert (fields["b"].version, fields["c"].version, fields["d"].version) == (1, 4, 5)


def test_synthesis_makes_unique_items_distinct() -> None:
    arguments = synthesize_arguments(MODELS["collections"].model_json_schema())
    assert arguments["ids"] == [1, 2, 3]
    assert arguments["tags"] == ["example", "example1", "example2"]
    assert arguments["codes"] == [10, 20]
    assert arguments["rgb"] == [1, 2, 3]
    assert arguments["pair"] == ["example", 2]


def test_synthesis_stops_recursion_through_optional_paths() -> None:
    assert synthesize_arguments(Node.model_json_schema()) == {
        "value": 1,
        "children": [{"value": 1}],
    }
    assert synthesize_arguments(Category.model_json_schema()) == {
        "name": "example",
        "parent": {"name": "example"},
    }


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "string"}, "JSON object"),
        ({"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]}, "too deeply"),
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/Nope"}}}, "cannot resolve"),
        ({"type": "object", "properties": {"a": {"$ref": "elsewhere.json"}}}, "cannot resolve"),
    ],
)
def test_synthesis_refuses_what_it_cannot_satisfy(schema: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        synthesize_arguments(schema)


def test_synthesis_best_effort_for_patterns_beyond_the_generator() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": r"^(?=x)\w+$"}}}
    assert synthesize_arguments(schema) == {"a": "example"}  # documented limit: lookarounds


# -- FakeModel -----------------------------------------------------------------------------------


def _spec(name: str, model: type[BaseModel]) -> ToolSpecification:
    return ToolSpecification(name=name, parameters=model.model_json_schema())


SPECS = [_spec("nested", MODELS["nested"]), _spec("enums", MODELS["enums"])]


def _request(*messages: Any, tools: Any = SPECS, **parameters: Any) -> ChatRequest:
    return ChatRequest(
        messages=list(messages), parameters=ChatRequestParameters(tools=tools, **parameters)
    )


def test_fake_model_is_a_chat_model() -> None:
    assert isinstance(FakeModel(), ChatModel)
    assert repr(FakeModel()) == "FakeModel()"


def test_first_turn_calls_every_offered_tool_with_valid_arguments() -> None:
    response = FakeModel().chat(_request(UserMessage(content="go")))
    calls = response.ai_message.tool_calls
    assert [(c.id, c.name) for c in calls] == [("fake_call_1", "nested"), ("fake_call_2", "enums")]
    assert response.finish_reason == "tool_execution"
    for call, name in zip(calls, ("nested", "enums"), strict=True):
        MODELS[name].model_validate_json(call.arguments, strict=True)
    assert response.metadata == {"model": "fake"}


def test_after_the_results_it_summarises_them() -> None:
    model = FakeModel()
    user = UserMessage(content="go")
    first = model.chat(_request(user)).ai_message
    results = [
        ToolResultMessage(tool_call_id="fake_call_1", tool_name="nested", text='{"ok":true}'),
        ToolResultMessage(
            tool_call_id="fake_call_2", tool_name="enums", text="bad input\nretry", is_error=True
        ),
    ]
    response = model.chat(_request(user, first, *results))
    assert response.ai_message.text == 'nested: {"ok":true}\nenums: error: bad input retry'
    assert not response.ai_message.has_tool_calls
    assert response.finish_reason == "stop"


def test_only_tools_not_yet_called_this_turn_are_called_and_ids_stay_unique() -> None:
    model = FakeModel()
    earlier = (AiMessage(tool_calls=[ToolCall(id="fake_call_1", name="nested", arguments="{}")]),)
    result = ToolResultMessage(tool_call_id="fake_call_1", tool_name="nested", text="done")
    response = model.chat(_request(UserMessage(content="go"), *earlier, result))
    assert [(c.id, c.name) for c in response.ai_message.tool_calls] == [("fake_call_2", "enums")]

    # A new user message starts a new turn: every tool is called again, with fresh ids.
    history = [UserMessage(content="go"), *earlier, result, response.ai_message]
    history.append(ToolResultMessage(tool_call_id="fake_call_2", tool_name="enums", text="ok"))
    again = model.chat(_request(*history, UserMessage(content="once more")))
    assert [c.id for c in again.ai_message.tool_calls] == ["fake_call_3", "fake_call_4"]


def test_tool_choice_none_and_named() -> None:
    model = FakeModel()
    none = model.chat(_request(UserMessage(content="hi"), tool_choice=ToolChoice.NONE))
    assert none.ai_message.text == "Echo: hi"
    named = model.chat(_request(UserMessage(content="hi"), tool_choice="enums"))
    assert [c.name for c in named.ai_message.tool_calls] == ["enums"]


def test_without_tools_it_echoes_the_last_user_message() -> None:
    model = FakeModel()
    plain = model.chat(ChatRequest(messages=[UserMessage(content="hello there")]))
    assert plain.ai_message.text == "Echo: hello there"
    parts = UserMessage(
        content=[
            TextContent(text="look"),
            ImageContent(url="https://example.com/a.png"),
            TextContent(text="here"),
        ]
    )
    assert model.chat(_request(parts, tools=None)).ai_message.text == "Echo: look here"
    usage = plain.token_usage
    assert usage is not None and usage.input_tokens > 0
    assert usage.output_tokens == len("Echo: hello there") // 4 + 1
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens


def test_a_schema_it_cannot_satisfy_is_a_model_error() -> None:
    spec = ToolSpecification(
        name="loop",
        parameters={"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]},
    )
    with pytest.raises(ModelError, match="cannot synthesize arguments for tool 'loop'"):
        FakeModel().chat(_request(UserMessage(content="go"), tools=[spec]))


def test_stream_replays_chat() -> None:
    model = FakeModel()
    request = _request(UserMessage(content="go"))
    events = list(model.stream(request))
    assert [type(e) for e in events] == [ToolCallDelta, ToolCallDelta, ResponseComplete]
    assert isinstance(events[-1], ResponseComplete)
    assert events[-1].response == model.chat(request)
    text_events = list(model.stream(ChatRequest(messages=[UserMessage(content="a b")])))
    assert [e.text for e in text_events if isinstance(e, TextDelta)] == ["Echo: ", "a ", "b"]


async def test_async_paths_match_sync() -> None:
    model = FakeModel()
    request = _request(UserMessage(content="go"))
    assert await model.achat(request) == model.chat(request)
    events = [event async for event in model.astream(request)]
    assert events == list(model.stream(request))


# -- with real tools and the loop ------------------------------------------------------------------


@tool
def place_order(order: Order, express: bool = False) -> str:
    """Place an order."""
    return f"{len(order.items)} items to {order.address.zip_code}"


@tool
def plan_route(start: Point, stops: list[Point], filters: Filters | None = None) -> float:
    """Plan a route."""
    return float(len(stops))


@tool
def schedule(
    when: dt.datetime,
    day: dt.date,
    every: dt.timedelta,
    attendees: set[uuid.UUID],
    color: Color = Color.RED,
    level: Level = Level.LOW,
) -> dict[str, str]:
    """Schedule a meeting."""
    return {"when": when.isoformat(), "color": color.value}


@tool
def adopt(pet: Annotated[Cat | Dog, Field(discriminator="kind")], budget: decimal.Decimal) -> None:
    """Adopt a pet."""


@tool
async def tag(
    labels: Annotated[list[Annotated[str, Field(pattern=r"^#[a-z]{2,}$")]], Field(min_length=2)],
    weights: dict[str, float],
    tree: Node | None = None,
) -> list[str]:
    """Tag things."""
    return labels


@tool
def measure(
    width: Annotated[float, Field(gt=0, lt=10)],
    count: Annotated[int, Field(multiple_of=3, ge=4)],
    unit: Literal["cm", "in"] = "cm",
) -> str:
    """Measure."""
    return f"{width * count}{unit}"


TOOLS: list[Tool[..., Any]] = [place_order, plan_route, schedule, adopt, tag, measure]


@pytest.mark.parametrize("the_tool", TOOLS, ids=lambda t: t.name)
def test_fake_arguments_pass_the_tools_own_validation(the_tool: Any) -> None:
    response = FakeModel().chat(_request(UserMessage(content="go"), tools=[the_tool.specification]))
    (call,) = response.ai_message.tool_calls
    the_tool.validate_arguments(call.arguments)  # raises ToolArgumentsError if invalid


def test_fake_model_drives_a_varied_tool_set_to_completion() -> None:
    result = ToolService(TOOLS).chat(FakeModel(), [UserMessage(content="do it all")])
    assert [e.call.name for e in result.tool_executions] == [t.name for t in TOOLS]
    assert not any(e.failed for e in result.tool_executions)
    lines = (result.final_response.ai_message.text or "").splitlines()
    assert [line.split(":")[0] for line in lines] == [t.name for t in TOOLS]
    assert "place_order: 2 items to 77777-7777" in lines
    assert "adopt: Success" in lines


async def test_fake_model_drives_the_async_loop_too() -> None:
    result = await ToolService(TOOLS).achat(FakeModel(), [UserMessage(content="do it all")])
    assert len(result.tool_executions) == len(TOOLS)
    assert not any(e.failed for e in result.tool_executions)


@pytest.mark.parametrize(
    "pattern",
    [
        r"^\d{5}(-\d{4})?$",
        r"^[A-Z]{3}-\d{4}$",
        r"^(?:red|green|blue)$",
        r"^(?P<user>[a-z0-9._-]+)@example\.org$",
        r"^[^,;]+$",
        r"^\w+\s\w+$",
        r"^[a-f0-9]{8}\b",
        r"v\d+\.\d+(\.\d+)?",
        r"^a{2,}b*?c+$",
        r"^[-+]?[0-9]*\.?[0-9]+$",
        r"^[]a]x$",
    ],
)
def test_synthesis_matches_patterns_of_the_documented_subset(pattern: str) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": pattern}}}
    value = synthesize_arguments(schema)["a"]
    assert re.search(pattern, value), (pattern, value)
    assert not value.startswith("example")


@pytest.mark.parametrize("pattern", [r"^(?=x)\w+$", r"^(a)\1$", r"(?i)abc", r"^\p{L}+$", r"[z-a]"])
def test_synthesis_falls_back_beyond_the_documented_subset(pattern: str) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": pattern}}}
    assert isinstance(synthesize_arguments(schema)["a"], str)
