"""Adversarial `@tool` signatures and return values."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Optional

import pytest
from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema
from typing_extensions import TypeAliasType, TypedDict

from agentforge_typed import ToolCall, ToolContext, ToolService, tool


def run(t: Any, **arguments: Any) -> Any:
    return t.execute(ToolCall(id="c", name=t.name, arguments=json.dumps(arguments)))


def test_mutable_default_is_fresh_for_every_validated_call() -> None:
    @tool
    def collect(item: str, bag: list[str] = []) -> list[str]:  # noqa: B006 - the point
        bag.append(item)
        return bag

    assert run(collect, item="a").value == ["a"]
    assert run(collect, item="b").value == ["b"]
    assert collect.specification.parameters["properties"]["bag"]["default"] == []


def test_optional_without_default_is_required_but_nullable() -> None:
    @tool
    def find(limit: Optional[int]) -> str:  # noqa: UP045 - the spelling under test
        return repr(limit)

    assert find.specification.parameters["required"] == ["limit"]
    assert run(find, limit=None).text == "None"
    missing = find.execute(ToolCall(id="c", name="find", arguments="{}"))
    assert missing.error_kind == "arguments" and "$.limit" in missing.text


def test_keyword_only_and_positional_only_parameters() -> None:
    @tool
    def mix(a: int, /, b: int, *, c: int = 3) -> list[int]:
        return [a, b, c]

    assert run(mix, a=1, b=2).value == [1, 2, 3]
    assert run(mix, a=1, b=2, c=9).value == [1, 2, 9]
    assert mix.specification.parameters["required"] == ["a", "b"]


def test_positional_only_parameter_with_a_private_name() -> None:
    @tool
    def private(_token: str, /, json: int) -> str:
        return f"{_token}:{json}"

    assert set(private.specification.parameters["properties"]) == {"_token", "json"}
    assert run(private, _token="t", json=2).text == "t:2"


@pytest.mark.parametrize(
    "name", ["model_config", "schema", "json", "copy", "validate", "dict", "model_fields"]
)
def test_parameters_named_like_basemodel_attributes(name: str) -> None:
    namespace: dict[str, Any] = {}
    exec(f"def shadow({name}: int) -> int:\n    return {name} * 2", namespace)
    shadow = tool(namespace["shadow"])
    assert list(shadow.specification.parameters["properties"]) == [name]
    assert shadow.specification.parameters["required"] == [name]
    assert run(shadow, **{name: 21}).value == 42
    assert shadow.validate_arguments(json.dumps({name: 1})) is not None
    renamed = shadow.execute(ToolCall(id="c", name="shadow", arguments='{"arg0_' + name + '": 1}'))
    assert renamed.error_kind == "arguments"


def test_leading_underscore_parameters_keep_their_names() -> None:
    @tool
    def hidden(_a: int, __b: int = 0) -> int:
        return _a + __b

    assert list(hidden.specification.parameters["properties"]) == ["_a", "__b"]
    assert run(hidden, _a=1, __b=2).value == 3


class Counter:
    def __init__(self) -> None:
        self.total = 0

    @tool
    def add(self, amount: int) -> int:
        """Add to the counter."""
        self.total += amount
        return self.total


def test_method_through_the_class_is_unbound_and_refuses_to_execute() -> None:
    with pytest.raises(TypeError, match="through an instance"):
        Counter.add.execute(ToolCall(id="c", name="add", arguments='{"amount": 1}'))
    counter = Counter()
    assert counter.add.execute(ToolCall(id="c", name="add", arguments='{"amount": 2}')).value == 2
    assert "self" not in Counter.add.specification.parameters["properties"]


def test_an_unbound_method_tool_is_refused_at_registration() -> None:
    with pytest.raises(TypeError, match="through an instance"):
        ToolService([Counter.add])
    assert ToolService([Counter()]).tools[0].name == "add"


def test_functools_partial_becomes_a_tool_without_the_bound_parameters() -> None:
    def greet(greeting: str, name: str) -> str:
        """Greet someone."""
        return f"{greeting}, {name}"

    hello = tool(functools.partial(greet, "Hello"))
    assert hello.name == "greet" and hello.description == "Greet someone."
    assert list(hello.specification.parameters["properties"]) == ["name"]
    assert run(hello, name="Ada").text == "Hello, Ada"


def test_callable_object_becomes_a_tool() -> None:
    class Multiplier:
        """Multiply by a fixed factor."""

        def __init__(self, factor: int) -> None:
            self.factor = factor

        def __call__(self, value: int) -> int:
            return value * self.factor

    triple = tool(name="triple")(Multiplier(3))
    assert list(triple.specification.parameters["properties"]) == ["value"]
    assert run(triple, value=5).value == 15
    unnamed = tool(Multiplier(2))
    assert unnamed.name == "Multiplier" and unnamed.description == "Multiply by a fixed factor."


class Greeter:
    """Greet someone by name."""

    def __call__(self, name: str) -> str:
        return f"Hello, {name}"


class Shouter(Greeter):
    def __call__(self, name: str) -> str:
        """Greet someone, loudly.

        Args:
            name: Who to greet.
        """
        return f"HELLO, {name.upper()}"


def test_callable_object_is_described_by_its_call_or_its_class() -> None:
    # At module level, where `inspect.getdoc(Greeter.__call__)` finds "Call self as a function."
    assert tool(Greeter()).description == "Greet someone by name."
    shout = tool(Shouter())
    assert shout.description == "Greet someone, loudly."
    assert shout.specification.parameters["properties"]["name"]["description"] == "Who to greet."


def test_generator_function_is_refused() -> None:
    def numbers(limit: int) -> Iterator[int]:
        yield from range(limit)

    async def anumbers(limit: int) -> Any:
        for number in range(limit):
            yield number

    for function in (numbers, anumbers):
        with pytest.raises(TypeError, match="generator function"):
            tool(function)


class Node(BaseModel):
    label: str
    children: list[Node] = []


def test_recursive_return_type_is_dumped() -> None:
    @tool
    def tree(depth: int) -> Node:
        node = Node(label="leaf")
        for level in range(depth):
            node = Node(label=f"l{level}", children=[node])
        return node

    assert json.loads(run(tree, depth=2).text) == {
        "label": "l1",
        "children": [{"label": "l0", "children": [{"label": "leaf", "children": []}]}],
    }


def test_unserializable_return_value_is_an_unreadable_result() -> None:
    @tool
    def opaque() -> Any:
        return object()

    result = opaque.execute(ToolCall(id="c", name="opaque", arguments="{}"))
    assert result.is_error and result.error_kind == "unreadable_result"
    assert result.text.startswith(
        "Tool `opaque` ran, but its result could not be read (PydanticSerializationError"
    )


def test_circular_return_value_is_an_unreadable_result() -> None:
    @tool
    def loop() -> dict[str, Any]:
        data: dict[str, Any] = {}
        data["self"] = data
        return data

    result = loop.execute(ToolCall(id="c", name="loop", arguments="{}"))
    assert result.error_kind == "unreadable_result" and "ircular" in result.text


async def test_unserializable_return_value_is_an_unreadable_result_async() -> None:
    @tool
    async def opaque() -> Any:
        return object()

    result = await opaque.aexecute(ToolCall(id="c", name="opaque", arguments="{}"))
    assert result.error_kind == "unreadable_result"


# --- refused at decoration, naming the function and the parameter ---------------------------------


def decoration_error(function: Callable[..., Any]) -> str:
    with pytest.raises(TypeError) as refused:
        tool(function)
    return str(refused.value)


class HoldsContext(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    context: ToolContext[dict[str, str]]


class ContextEntry(TypedDict):
    context: ToolContext


def in_a_list(contexts: list[ToolContext[dict[str, str]]]) -> None: ...
def in_a_model(holder: HoldsContext) -> None: ...
def in_a_dict_value(by_name: dict[str, ToolContext]) -> None: ...
def in_a_typed_dict(entry: ContextEntry, ctx: ToolContext[None]) -> None: ...
def hidden_from_the_schema(items: list[SkipJsonSchema[ToolContext[None]]]) -> None: ...


@pytest.mark.parametrize(
    ("function", "parameter"),
    [
        (in_a_list, "contexts"),
        (in_a_model, "holder"),
        (in_a_dict_value, "by_name"),
        (in_a_typed_dict, "entry"),
        (hidden_from_the_schema, "items"),
    ],
)
def test_a_context_inside_a_parameter_type_is_refused(
    function: Callable[..., Any], parameter: str
) -> None:
    # Only a parameter of its own is injected; anywhere else the model would fill (forge) it.
    name = function.__name__
    assert decoration_error(function) == (
        f"tool `{name}` ({name!r}), parameter `{parameter}`: a `ToolContext` is injected only as "
        "a parameter of the tool itself, never inside another parameter's type"
    )


def test_a_context_in_a_union_with_an_argument_type_is_refused() -> None:
    def either(value: ToolContext[None] | int) -> None: ...

    assert decoration_error(either) == (
        "tool `either` ('test_a_context_in_a_union_with_an_argument_type_is_refused.<locals>"
        ".either'), parameter `value`: a `ToolContext` cannot share a union with argument types: "
        "the parameter is either injected or filled by the model"
    )


class AppContext(ToolContext[dict[str, str]]):
    pass


AliasedContext = TypeAliasType("AliasedContext", ToolContext[dict[str, str]])


@pytest.mark.parametrize("annotation", [AppContext, AliasedContext, AliasedContext | None])
def test_a_context_subclass_or_alias_is_injected(annotation: Any) -> None:
    def whoami(ctx: Any, greeting: str) -> str:
        return f"{greeting}, {ctx.deps['user']}"

    whoami.__annotations__ = {"ctx": annotation, "greeting": str, "return": str}
    made = tool(whoami)
    assert list(made.specification.parameters["properties"]) == ["greeting"]
    call = ToolCall(id="c", name="whoami", arguments='{"greeting": "hi"}')
    assert made.execute(call, deps={"user": "ada"}).text == "hi, ada"


def test_a_context_parameter_of_its_own_is_still_injected() -> None:
    @tool
    def whoami(ctx: ToolContext[dict[str, str]], greeting: str) -> str:
        return f"{greeting}, {ctx.deps['user']}"

    assert list(whoami.specification.parameters["properties"]) == ["greeting"]
    call = ToolCall(id="c", name="whoami", arguments='{"greeting": "hi"}')
    assert whoami.execute(call, deps={"user": "alice"}).text == "hi, alice"


def test_a_class_as_a_type_is_refused_and_any_is_not() -> None:
    def pick(kind: type[int]) -> None: ...

    assert decoration_error(pick) == (
        f"tool `pick` ({pick.__qualname__!r}), parameter `kind`: type type[int] cannot be "
        "expressed as JSON Schema for a model to fill "
        "(Cannot generate a JsonSchema for core_schema.IsSubclassSchema (<class 'int'>))"
    )

    def anything(value: Any) -> None: ...

    assert tool(anything).specification.parameters["properties"] == {"value": {}}


def look_behind(key: Annotated[str, Field(pattern="(?<=a)b")]) -> None: ...
def textual_bound(key: Annotated[int, Field(gt="a")]) -> None: ...


@pytest.mark.parametrize(
    ("function", "reason"),
    [
        (look_behind, "error: look-around, including look-ahead and look-behind, is not supported"),
        (textual_bound, "ValueError: 'gt' must be coercible to an integer"),
    ],
)
def test_a_constraint_pydantic_cannot_build_is_refused(
    function: Callable[..., Any], reason: str
) -> None:
    message = decoration_error(function)
    name = function.__name__
    assert message.startswith(f"tool `{name}` ({name!r}), parameter `key`: type typing.Annotated[")
    assert message.endswith(f"] has a constraint pydantic cannot build a validator for ({reason})")


def test_an_unresolvable_annotation_names_its_parameter() -> None:
    def forecast(city: str, days: Undefined) -> None: ...  # type: ignore[name-defined]  # noqa: F821
    def report(city: str) -> Undefined: ...  # type: ignore[name-defined]  # noqa: F821

    assert decoration_error(forecast) == (
        f"tool `forecast` ({forecast.__qualname__!r}), parameter `days`: "
        "cannot resolve its type annotations: name 'Undefined' is not defined"
    )
    assert decoration_error(report) == (
        f"tool `report` ({report.__qualname__!r}), return type: "
        "cannot resolve its type annotations: name 'Undefined' is not defined"
    )


def test_an_invalid_tool_name_names_the_function() -> None:
    def lookup(key: str) -> None: ...

    with pytest.raises(ValueError) as refused:
        tool(name="has space")(lookup)
    assert str(refused.value) == (
        f"invalid tool name 'has space' (function {lookup.__qualname__!r}): "
        "a tool name must match ^[a-zA-Z0-9_-]{1,64}$"
    )


def test_a_default_that_violates_its_own_type_is_refused_naming_the_parameter() -> None:
    def forecast(city: str, days: int = "3") -> None: ...  # type: ignore[assignment]
    def page(size: Annotated[int, Field(ge=1)] = 0) -> None: ...
    def fill(count: int = Field("many", description="How many.")) -> None: ...  # type: ignore[assignment]

    assert decoration_error(forecast) == (
        f"tool `forecast` ({forecast.__qualname__!r}), parameter `days`: the default '3' does not "
        "fit the parameter's type `int` (Input should be a valid integer); give a default of that "
        "type"
    )
    assert (
        "parameter `size`: the default 0 does not fit the parameter's type `int` (Input should "
        "be greater than or equal to 1)"
    ) in decoration_error(page)
    assert "parameter `count`: the default 'many' does not fit" in decoration_error(fill)


def test_a_default_its_own_validator_fails_on_otherwise_is_left_to_the_call() -> None:
    def odd(value: str) -> str:
        raise KeyError("the program's validator")

    @tool
    def lookup(key: Annotated[str, AfterValidator(odd)] = "") -> str:
        return key

    assert lookup.name == "lookup"  # decorated: the default is not refused for what it raised


def test_defaults_of_their_own_type_are_accepted() -> None:
    @tool
    def forecast(
        city: str = "Paris",
        days: Annotated[int, Field(ge=1, alias="Days")] = 3,
        ratio: float = 1,  # an int is a float's value
        limit: int | None = None,
        tags: tuple[str, ...] = (),
        count: int = Field(2, description="How many."),
        stamp: list[int] = Field(default_factory=list),  # noqa: B008
    ) -> str:
        return f"{city} {days} {ratio} {limit} {tags} {count} {stamp}"

    assert run(forecast).text == "Paris 3 1 None () 2 []"
