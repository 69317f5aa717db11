"""Eval cases: what a user writes (one JSON object per line, or YAML), validated by pydantic.

A case names the input, the calls the model's first answer should make (BFCL's convention: each
argument lists its acceptable values; `""` among them means the argument may be left out), and
optionally the typed output, a round limit, a tool selection, tags, further user turns and a
`check` callable for anything else. Every way a file can be wrong is a `CasesError` naming the
file, the line and the field.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .._messages import ChatMessage

__all__ = [
    "CasesError",
    "EvalCase",
    "ExpectedCall",
    "Turn",
    "cases_from",
    "load_cases",
]

MAX_ID_CHARS = 200
"""The longest case id: ids are shown in tables and compared across runs."""


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ExpectedCall(_Strict):
    """A call the model should make: the tool's name and each argument's acceptable values."""

    name: Annotated[str, Field(min_length=1)]
    arguments: dict[str, list[Any]] = Field(default_factory=dict)
    """Argument name -> the values that match (any one of them); `""` in the list means the
    argument may be left out. An argument the model sends that is not listed is a mismatch."""

    @field_validator("arguments")
    @classmethod
    def _some_value(cls, arguments: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for name, values in arguments.items():
            if not values:
                raise ValueError(
                    f"{name!r} lists no acceptable value: give at least one "
                    '(`[""]` if it may be left out)'
                )
        return arguments


Input = str | list[ChatMessage]
"""A user message, or a whole conversation (messages as `ChatMessage` JSON: `role`, ...)."""


class Turn(_Strict):
    """A further user turn, sent once the turn before it ended (the model answered without
    calls): its input is added to the conversation so far."""

    input: Input
    expected_calls: list[ExpectedCall] | None = None
    """The calls this turn's first answer should make (`[]`: none); `None`: not scored."""
    tools: list[str] | None = None
    """The tools offered from this turn on (`None`: the case's selection)."""


class EvalCase(_Strict):
    """One case of an eval: an input, and what the model should do with it."""

    id: Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS)]
    input: Input
    expected_calls: list[ExpectedCall] | None = None
    """The calls the first answer should make; `[]` expects no call at all (irrelevance);
    `None` (left out): calls are not scored."""
    ordered: bool = False
    """Whether several expected calls must come in the listed order (default: any order)."""
    expected_output: Any = None
    """The run's output as JSON (`output_type`'s value dumped), or its final text when there is
    no output type; `null` (the default): not compared."""
    max_rounds: Annotated[int | None, Field(ge=1)] = None
    """Model calls allowed for each turn (default: the service's `max_round_trips`)."""
    tools: list[str] | None = None
    """Offer only these tools (names and `"group:NAME"` selectors); `None`: every tool."""
    tags: list[str] = Field(default_factory=list)
    check: str | None = None
    """`module:callable` called as `check(result, case)` after the run: it fails the case by
    returning `False` or raising `AssertionError` (its message is reported)."""
    turns: list[Turn] = Field(default_factory=list)
    """Further user turns, each run after the one before it (a multi-turn conversation)."""
    strings: Literal["bfcl", "exact"] = "bfcl"
    """How strings compare: `"bfcl"` ignores case, spaces and `,./-_*^` as BFCL does; `"exact"`."""

    @field_validator("check")
    @classmethod
    def _check_spec(cls, spec: str | None) -> str | None:
        if spec is not None:
            module, colon, attribute = spec.partition(":")
            if not (module and colon and attribute):
                raise ValueError(f"expected module:callable, got {spec!r}")
        return spec

    def all_turns(self) -> list[Turn]:
        """The first turn (the case's own `input` and `expected_calls`) and the further ones."""
        return [
            Turn(input=self.input, expected_calls=self.expected_calls, tools=self.tools),
            *self.turns,
        ]


class CasesError(ValueError):
    """A cases file that cannot be read: names the file, the line and the field."""

    def __init__(self, source: str, line: int | None, message: str) -> None:
        self.source = source
        self.line = line
        where = source if line is None else f"{source}:{line}"
        super().__init__(f"{where}: {message}")


def load_cases(path: str | Path) -> list[EvalCase]:
    """Read the cases of a file: JSON lines (`.jsonl`, one case per line; blank lines are
    skipped), or YAML (`.yaml`/`.yml`, a list of cases; needs PyYAML, the `evals` extra).

    Raises:
        CasesError: The file cannot be read, a line is not JSON, a case is invalid (the line and
            the field say where), or two cases share an id.
    """
    path = Path(path)
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CasesError(source, None, f"cannot be read: {exc}") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        entries: Iterable[tuple[int, Any]] = _yaml_entries(source, text)
    else:
        entries = _json_lines(source, text)
    return cases_from(entries, source)


def cases_from(entries: Iterable[tuple[int, Any]], source: str = "<cases>") -> list[EvalCase]:
    """Validate `(line, object)` pairs as cases (what `load_cases` does after parsing).

    Raises:
        CasesError: A case is invalid, or two cases share an id.
    """
    cases: list[EvalCase] = []
    seen: dict[str, int] = {}
    for line, entry in entries:
        try:
            case = EvalCase.model_validate(entry)
        except ValidationError as exc:
            raise CasesError(source, line, _first_error(exc, entry)) from None
        if case.id in seen:
            raise CasesError(
                source,
                line,
                f"id {case.id!r} is already the id of the case on line {seen[case.id]}",
            )
        seen[case.id] = line
        cases.append(case)
    if not cases:
        raise CasesError(source, None, "holds no case")
    return cases


def _json_lines(source: str, text: str) -> Iterator[tuple[int, Any]]:
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as exc:
            raise CasesError(source, number, f"not JSON: {exc}") from None
        yield number, value


def _yaml_entries(source: str, text: str) -> list[tuple[int, Any]]:
    try:
        yaml: Any = importlib.import_module("yaml")
    except ImportError:
        raise CasesError(
            source,
            None,
            "YAML needs PyYAML: pip install 'agentforge-typed[evals]', or write JSON lines",
        ) from None
    try:
        loader = yaml.SafeLoader(text)
        try:
            root = loader.get_single_node()
            if root is None:
                return []
            if not isinstance(root, yaml.SequenceNode):
                raise CasesError(source, root.start_mark.line + 1, "expected a list of cases")
            return [
                (node.start_mark.line + 1, loader.construct_object(node, deep=True))
                for node in root.value
            ]
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = None if mark is None else mark.line + 1
        raise CasesError(source, line, f"not YAML: {getattr(exc, 'problem', exc)}") from None


def _first_error(exc: ValidationError, entry: Any) -> str:
    """The first problem of a case, as `field.path: message` (and how many more there are)."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    value = entry.get("input") if isinstance(entry, dict) else None
    if isinstance(value, list):
        # `input` is a string or a list of messages: say what is wrong with the list it is.
        first = next((e for e in errors if _union_branch(e["loc"]).startswith("list")), first)
    steps = [
        step for i, step in enumerate(first["loc"]) if not (i == 1 and _union_branch(first["loc"]))
    ]
    location = ".".join(f"[{s}]" if isinstance(s, int) else str(s) for s in steps).replace(
        ".[", "["
    )
    message = first["msg"]
    if first["type"] == "missing":
        message = "required, and missing"
    elif first["type"] == "extra_forbidden":
        message = "not a field of a case"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{location or 'the case'}: {message}{more}"


def _union_branch(location: tuple[int | str, ...]) -> str:
    """The union member a location of `input` names (`str`, `list[...]`), or `""`."""
    if len(location) > 1 and location[0] == "input" and isinstance(location[1], str):
        return location[1]
    return ""
