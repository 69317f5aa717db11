"""Static-typing contract of `@tool`: a tool keeps its function's signature (ParamSpec), so mypy
accepts calls with the real argument types and rejects wrong ones (each `type: ignore` is checked
by `warn_unused_ignores`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel
from typing_extensions import assert_type

from agentforge_typed import Tool, ToolArgumentsError, ToolCall, ToolContext, tool
from agentforge_typed.tools import (
    HttpTool,
    ReturnBehavior,
    ToolExecutionResult,
    ToolOptions,
    ToolSpecification,
)
from agentforge_typed.tools._base import ToolExecutor, ToolLike


class Item(BaseModel):
    sku: str
    quantity: int


@tool
def get_weather(city: str, days: int = 1) -> str:
    """Forecast for a city."""
    return f"{city}: sunny for {days} days"


@tool(name="place_order", strict=False, timeout=5.0, return_behavior=ReturnBehavior.IMMEDIATE)
def place_order(items: list[Item], ctx: ToolContext[str]) -> dict[str, int]:
    return {"lines": len(items)}


@tool
async def fetch(url: str) -> bytes:
    return url.encode()


class Shop:
    @tool
    def stock(self, sku: str) -> int:
        return len(sku)


weather: Callable[[str, int], str] = get_weather
as_tool: Tool[..., str] = get_weather
assert_type(get_weather("Paris"), str)
assert_type(get_weather("Paris", days=3), str)
get_weather(42)  # type: ignore[arg-type]
get_weather("Paris", days="3")  # type: ignore[arg-type]
get_weather("Paris", weeks=1)  # type: ignore[call-arg]

assert_type(
    place_order([Item(sku="a", quantity=1)], ToolContext("deps", "id", "place_order")),
    dict[str, int],
)
place_order(["a"], ToolContext("deps", "id", "place_order"))  # type: ignore[list-item]


async def use_fetch() -> None:
    assert_type(await fetch("https://example.com"), bytes)
    await fetch(b"https://example.com")  # type: ignore[arg-type]
    assert_type(await fetch.aexecute(call), ToolExecutionResult)


shop = Shop()
stock: Callable[[str], int] = shop.stock
unbound: Callable[[Shop, str], int] = Shop.stock
assert_type(shop.stock("a"), int)
shop.stock(1)  # type: ignore[arg-type]

assert_type(get_weather.name, str)
assert_type(get_weather.description, str)
assert_type(get_weather.specification, ToolSpecification)
assert_type(get_weather.args_model, type[BaseModel])
assert_type(get_weather.timeout, float | None)
assert_type(get_weather.validate_arguments('{"city": "Paris"}'), BaseModel)

# What the ToolService relies on: a Tool is a `ToolLike` (and so a `ToolExecutor`).
registered: ToolLike = get_weather
executor: ToolExecutor = shop.stock
not_a_tool: ToolLike = Item  # type: ignore[assignment]

call = ToolCall(id="call_1", name="get_weather", arguments='{"city": "Paris"}')
assert_type(get_weather.execute(call), ToolExecutionResult)
assert_type(get_weather.execute(call, deps=object()), ToolExecutionResult)

# The result budget: per tool (a whole number of characters, or None for the service's).
assert_type(get_weather.max_result_chars, int | None)
assert_type(get_weather.execute(call).full_text, str | None)
tool(max_result_chars=10_000)
tool(max_result_chars="10k")  # type: ignore[call-overload]
tool(retry_safe=True, sequential=True)
tool(retry_safe="yes")  # type: ignore[call-overload]
get_weather.execute('{"city": "Paris"}')  # type: ignore[arg-type]

tool(name="x", strict="yes")  # type: ignore[call-overload]

# Unknown keys are forbidden at every depth, or dropped (recorded): there is no "allow".
assert_type(get_weather.extra_arguments, Literal["forbid", "ignore"])
lenient = tool(extra_arguments="ignore")
tool(extra_arguments="allow")  # type: ignore[call-overload]

try:
    get_weather.validate_arguments("{}")
except ToolArgumentsError as error:
    assert_type(error.errors[0].path, str)

# The options are declared once (`ToolOptions`); mypy still sees each keyword and its type.
tool(name="x", timeout=None, extra_arguments="ignore")
tool(timeout="5")  # type: ignore[call-overload]
tool(extra_arguments="allow")  # type: ignore[call-overload]
tool(nmae="x")  # type: ignore[call-overload]
direct = Tool(get_weather.__wrapped__, name="weather", max_retries=1)
assert_type(direct("Paris"), str)
Tool(get_weather.__wrapped__, retries=1)  # type: ignore[call-arg]

common: ToolOptions = {"timeout": 5.0, "max_retries": 1}
shared = tool(**common)(get_weather.__wrapped__)
assert_type(shared("Paris"), str)
wrong: ToolOptions = {"timeout": "5"}  # type: ignore[typeddict-item]

# An HttpTool's configured secrets are found for it; `secrets=` names more (a list: a lone
# string is refused when the tool is made).
HttpTool("t", url="https://api.example.com/hooks/abc", secrets=["abc"], timeout=5.0)
