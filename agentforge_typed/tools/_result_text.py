"""A tool's return value → the text the model reads."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import pydantic_core
from pydantic import PydanticUserError, TypeAdapter
from pydantic.errors import PydanticSchemaGenerationError

__all__ = ["SUCCESS_TEXT", "ResultConverter", "result_text", "result_text_converter"]

SUCCESS_TEXT = "Success"
"""What the model reads when a tool returns `None`."""

ResultConverter = Callable[[Any], str]


def result_text_converter(return_annotation: Any) -> ResultConverter:
    """A converter for values of the declared return type (its serializer built at first use).

    `str` is sent as it is, `None` as `"Success"`, anything else as JSON through pydantic
    serialization of the declared type (so a model declared as the return type is dumped as that
    model, by alias, with its serializers). Without a usable annotation, pydantic-core infers
    the JSON from the value.
    """
    dump_json: Callable[[Any], bytes] | None = None

    def convert(value: Any) -> str:
        nonlocal dump_json
        if type(value) is str:
            return value
        if value is None:
            return SUCCESS_TEXT
        if isinstance(value, str):  # a `str` subclass such as a `StrEnum` member: its string
            return str.__str__(value)
        if dump_json is None:
            # Built at the first result to dump, not at decoration: many tools are never called,
            # or return only strings, and the adapter is a tenth of a small tool's decoration.
            dump_json = _dumper(return_annotation)
        return dump_json(value).decode()

    return convert


def _dumper(annotation: Any) -> Callable[[Any], bytes]:
    # No adapter where the declared type adds nothing to inference: `str` and `None` results
    # never reach the dumper, and a value that breaks its annotation is inferred anyway.
    if annotation in (inspect.Parameter.empty, Any, None, type(None), str) or isinstance(
        annotation, TypeVar
    ):
        return pydantic_core.to_json
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(annotation)
    except (PydanticSchemaGenerationError, PydanticUserError):
        return pydantic_core.to_json
    # Aliases on, as `pydantic_core.to_json` does: they are the type's outside-world names.
    # The adapter's core serializer directly: `TypeAdapter.dump_json` doubles the cost of a small
    # result in keyword handling. `warnings=False`: a value that does not match the declared type
    # is still serialized (by inference), which beats failing the call over an imprecise annotation.
    serializer = adapter.serializer
    return lambda value: serializer.to_json(value, by_alias=True, warnings=False)


result_text: ResultConverter = result_text_converter(Any)
"""The text the model reads for an undeclared return value: `str` as is, `None` → `"Success"`,
anything else → compact JSON (pydantic serializes models, dataclasses, datetimes, …)."""
