"""Per-call cost of a tool call (validate → call → result text) against its floor.

For three workloads — a 2-parameter tool, a nested order DTO with a list of line items, and a
12-parameter tool — with valid and with invalid arguments, this measures `tool.execute(call)`
next to two floors measured in the same run: a raw `TypeAdapter.validate_json` (strict) of the same
arguments, the direct function call, and `pydantic_core.to_json` of the result (for invalid
arguments: the `ValidationError` and its `.errors()`). The first floor validates into a
`TypedDict`; the second into the tool's own `args_model` (what the contract requires a tool to
build, and dearer: a model instance), calling the function with the instance's fields.

For invalid arguments a third floor, the "text floor", answers with the least text the contract
allows: the `TypedDict` floor plus a header, one line per error (pydantic's raw location, its
message and the input as JSON) and a closing line — no JSON paths, truncation, repair check,
`ArgumentProblem`s, exception or result object. It is a lower bound for any tool that tells the model
what was wrong, so it shows how much of the gap to the first floor is the report itself.

It prints ns/call, the ratio to each floor (target: at most 1.5x the `TypedDict` floor) and the
cold decoration time of each tool.

Run: `python benchmarks/dispatch.py [--quick]`. Numbers are the best of several repeats.
"""

from __future__ import annotations

import argparse
import time
import timeit
from collections.abc import Callable
from decimal import Decimal
from typing import Annotated, Any, Literal

import pydantic_core
from pydantic import BaseModel, Field, TypeAdapter, ValidationError
from pydantic_core import to_json
from typing_extensions import TypedDict

from agentforge_typed import Tool, ToolCall, tool

# --- workload 1: two parameters -------------------------------------------------------------------


def get_weather(city: str, days: int) -> str:
    """Forecast for a city.

    Args:
        city: The city name.
        days: How many days ahead.
    """
    return city


class WeatherArgs(TypedDict):
    city: str
    days: int


# --- workload 2: nested order DTO -----------------------------------------------------------------


class LineItem(BaseModel):
    sku: str
    quantity: Annotated[int, Field(ge=1)]
    unit_price: Decimal


class Address(BaseModel):
    street: str
    city: str
    country: Literal["DE", "FR", "US"]


class Order(BaseModel):
    customer_id: str
    items: list[LineItem]
    shipping: Address
    note: str | None = None


class Receipt(BaseModel):
    order_id: str
    lines: int


def place_order(order: Order) -> Receipt:
    """Place an order."""
    return Receipt(order_id=order.customer_id, lines=len(order.items))


class OrderArgs(TypedDict):
    order: Order


# --- workload 3: twelve parameters ----------------------------------------------------------------


def search(
    query: str,
    limit: int,
    offset: int,
    min_price: float,
    max_price: float,
    in_stock: bool,
    sort: Literal["price", "rating", "newest"],
    tags: list[str],
    brand: str | None = None,
    rating: float | None = None,
    currency: str = "EUR",
    include_used: bool = False,
) -> dict[str, Any]:
    """Search the catalogue."""
    return {"query": query, "limit": limit, "tags": tags}


class SearchArgs(TypedDict, total=False):
    query: str
    limit: int
    offset: int
    min_price: float
    max_price: float
    in_stock: bool
    sort: Literal["price", "rating", "newest"]
    tags: list[str]
    brand: str | None
    rating: float | None
    currency: str
    include_used: bool


ORDER = (
    '{"order": {"customer_id": "c-42", "shipping": {"street": "1 Main St", "city": "Lyon",'
    ' "country": "FR"}, "items": ['
    + ", ".join(
        f'{{"sku": "sku-{i}", "quantity": {i + 1}, "unit_price": "{i}.99"}}' for i in range(10)
    )
    + "]}}"
)
BAD_ORDER = ORDER.replace('"quantity": 3', '"quantity": 0').replace('"FR"', '"XX"')
SEARCH = (
    '{"query": "red shoes", "limit": 20, "offset": 40, "min_price": 10.0, "max_price": 99.5,'
    ' "in_stock": true, "sort": "price", "tags": ["sale", "summer"], "brand": "acme",'
    ' "rating": 4.5, "currency": "USD", "include_used": false}'
)

WORKLOADS: list[tuple[str, Callable[..., Any], Any, str, str]] = [
    (
        "2 params",
        get_weather,
        WeatherArgs,
        '{"city": "Paris", "days": 3}',
        '{"city": "Paris", "days": "3"}',
    ),
    ("order DTO, 10 items", place_order, OrderArgs, ORDER, BAD_ORDER),
    ("12 params", search, SearchArgs, SEARCH, SEARCH.replace("20", '"20"').replace("true", "1")),
]


def best_ns(functions: list[Callable[[], object]], number: int, repeat: int) -> list[float]:
    """Best-of-`repeat` mean time of one call of each function, in ns.

    The repeats are interleaved (floor, tool, floor, tool, ...) so that a slow spell of the
    machine hits every function alike instead of skewing one ratio.
    """
    best = [float("inf")] * len(functions)
    for _ in range(repeat):
        for index, function in enumerate(functions):
            best[index] = min(best[index], timeit.timeit(function, number=number))
    return [seconds / number * 1e9 for seconds in best]


def floor_call(
    adapter: TypeAdapter[Any], function: Callable[..., Any], raw: str
) -> Callable[[], object]:
    def run() -> object:
        try:
            arguments = adapter.validate_json(raw, strict=True)
        except ValidationError as error:
            return error.errors(include_url=False)
        return pydantic_core.to_json(function(**arguments))

    return run


def model_floor_call(
    adapter: TypeAdapter[BaseModel], function: Callable[..., Any], raw: str
) -> Callable[[], object]:
    def run() -> object:
        try:
            arguments = adapter.validate_json(raw, strict=True)
        except ValidationError as error:
            return error.errors(include_url=False)
        return pydantic_core.to_json(function(**arguments.__dict__))

    return run


def text_floor_call(adapter: TypeAdapter[Any], raw: str) -> Callable[[], object]:
    """The text floor, for invalid arguments only."""

    def run() -> object:
        try:
            adapter.validate_json(raw, strict=True)
        except ValidationError as error:
            text = "Invalid arguments:\n"
            for e in error.errors(include_url=False, include_context=False):
                text += f"- {e['loc']}: {e['msg']} (input: {to_json(e['input']).decode()})\n"
            return text + "Correct them and call again."
        raise AssertionError("the text floor is for invalid arguments")

    return run


def tool_call(dispatch: Tool[..., Any], raw: str) -> Callable[[], object]:
    call = ToolCall(id="call_1", name=dispatch.name, arguments=raw)
    return lambda: dispatch.execute(call).text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations (smoke run)")
    options = parser.parse_args()
    number, repeat = (2_000, 3) if options.quick else (20_000, 7)

    print(
        f"{'workload':<22} {'args':<8} {'floor ns':>9} {'model fl':>9} {'text fl':>9}"
        f" {'tool ns':>9} {'ratio':>6} {'vs model':>8} {'vs text':>8}"
    )
    cold: list[tuple[str, float]] = []
    for label, function, args_type, valid, invalid in WORKLOADS:
        start = time.perf_counter_ns()
        dispatch = tool(function)
        cold.append((label, (time.perf_counter_ns() - start) / 1e6))
        adapter: TypeAdapter[Any] = TypeAdapter(args_type)
        model_adapter: TypeAdapter[BaseModel] = TypeAdapter(dispatch.args_model)
        for kind, raw in (("valid", valid), ("invalid", invalid)):
            result = dispatch.execute(ToolCall(id="c", name=dispatch.name, arguments=raw))
            assert result.is_error == (kind == "invalid"), result.text
            timed = [
                floor_call(adapter, function, raw),
                model_floor_call(model_adapter, function, raw),
                tool_call(dispatch, raw),
            ]
            if kind == "invalid":
                timed.append(text_floor_call(adapter, raw))
            floor, model, ours, *rest = best_ns(timed, number, repeat)
            text, versus_text = f"{'-':>9}", f"{'-':>8}"
            if rest:
                text, versus_text = f"{rest[0]:>9.0f}", f"{ours / rest[0]:>7.2f}x"
            print(
                f"{label:<22} {kind:<8} {floor:>9.0f} {model:>9.0f} {text}"
                f" {ours:>9.0f} {ours / floor:>5.2f}x {ours / model:>7.2f}x {versus_text}"
            )
    print()
    for label, ms in cold:
        print(f"cold decoration, {label:<22} {ms:8.2f} ms")


if __name__ == "__main__":
    main()
