"""A tool's return value → the text the model reads."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import pydantic_core
from pydantic import PydanticUserError, TypeAdapter
from pydantic.errors import PydanticSchemaGenerationError

__all__ = [
    "SUCCESS_TEXT",
    "DeclaredResultText",
    "ResultConverter",
    "result_text",
]

SUCCESS_TEXT = "Success"
"""What the model reads when a tool returns `None`."""

ResultConverter = Callable[[Any], str]


class DeclaredResultText:
    """Converts values of the declared return type to text (its serializer built at first use,
    or by `prepare`).

    `str` is sent as it is, `None` as `"Success"`, anything else as JSON through pydantic
    serialization of the declared type (so a model declared as the return type is dumped as that
    model, by alias, with its serializers). Without a usable annotation, pydantic-core infers
    the JSON from the value.
    """

    __slots__ = ("_dump_json", "_problem", "annotation")

    def __init__(self, return_annotation: Any) -> None:
        self.annotation = return_annotation
        self._dump_json: Callable[[Any], bytes] | None = None
        self._problem: str | None = None

    def __call__(self, value: Any) -> str:
        if type(value) is str:
            return value
        if value is None:
            return SUCCESS_TEXT
        if isinstance(value, str):  # a `str` subclass such as a `StrEnum` member: its string
            return str.__str__(value)
        # Built at the first result to dump, not at decoration: many tools are never called,
        # or return only strings, and the adapter is a tenth of a small tool's decoration.
        dump_json = self._dump_json or self._build()
        return dump_json(value).decode()

    def prepare(self) -> str | None:
        """Build the serializer now; say why the declared type cannot be serialized, if so."""
        if self._dump_json is None:
            self._build()
        return self._problem

    def _build(self) -> Callable[[Any], bytes]:
        annotation = self.annotation
        dump_json: Callable[[Any], bytes] = pydantic_core.to_json
        # No adapter where the declared type adds nothing to inference: `str` and `None` results
        # never reach the dumper, and a value that breaks its annotation is inferred anyway.
        if annotation not in (inspect.Parameter.empty, Any, None, type(None), str) and (
            not isinstance(annotation, TypeVar)
        ):
            try:
                adapter: TypeAdapter[Any] = TypeAdapter(annotation)
            except PydanticSchemaGenerationError as error:
                # Its first sentence: the rest suggests model_config, which a return type lacks.
                self._problem = str(error).split(". ")[0].rstrip(".")
            except PydanticUserError:  # a forward reference not resolvable yet
                pass
            else:
                # Aliases on, as `pydantic_core.to_json` does: they are the type's outside-world
                # names. The adapter's core serializer directly: `TypeAdapter.dump_json` doubles
                # the cost of a small result in keyword handling. `warnings=False`: a value that
                # does not match the declared type is still serialized (by inference), which
                # beats failing the call over an imprecise annotation.
                serializer = adapter.serializer
                dump_json = partial(serializer.to_json, by_alias=True, warnings=False)
        self._dump_json = dump_json
        return dump_json


result_text: ResultConverter = DeclaredResultText(Any)
"""The text the model reads for an undeclared return value: `str` as is, `None` → `"Success"`,
anything else → compact JSON (pydantic serializes models, dataclasses, datetimes, …)."""
