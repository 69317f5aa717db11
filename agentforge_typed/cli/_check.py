"""`agentforge-typed check`: lint tool definitions before a provider rejects them.

Errors (non-zero exit): an item that cannot be made a tool, a name a provider refuses, a schema a
dialect cannot express, two tools with one name, a return type that cannot be serialized. Warnings: a tool or a parameter without a
description (the model has only the name to go by), annotations that contradict each other (an
MCP tool both read-only and destructive: a trusted server's tool is then treated as destructive). With a `ModelProfile`, also its limits: tools
at all, the number of tools, schema keywords the endpoint refuses (an error when the keyword
carries a type, a warning when it will be moved into a description), strict schemas sent plain.
A typed tool that returns images, documents, audio or files (its return annotation says so) is
a warning: Chat Completions sends them in a user message after the tool results, and a profile may
take them nowhere (an error under its `"error"` policy for `tool_result_content`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .._content import ContentKind
from .._exceptions import UnsupportedFeatureError
from .._request import ToolSpecification
from ..loop._service import ToolService
from ..providers._degrade import move_keywords
from ..providers._dialects import (
    DIALECTS,
    Dialect,
    SchemaDialectError,
    dialect_rules,
    render_schema,
)
from ..providers._profiles import ModelProfile
from ..tools._base import ToolLike
from ..tools._function import Tool
from ..tools._returns import content_kinds, returns_untyped_content
from ._declare import declaration
from ._target import Target, display_path, source_location, tools_of

__all__ = ["DEFAULT_DIALECTS", "Finding", "check_target"]

Level = Literal["error", "warning", "note"]

DEFAULT_DIALECTS: tuple[Dialect, ...] = DIALECTS
"""Checked unless `--dialect` says otherwise. `openai` and `anthropic` render `strict_schema` tools
strict, as the providers send them; `openai-strict` and `anthropic-strict` render every tool
strict, and what they cannot express is a warning for a tool that did not ask for
`strict_schema` (an error for one that did). What the `gemini` subset cannot express is a
warning: `GeminiChatModel` sends full JSON Schema unless told to use the subset."""

_STRICT_OF: dict[str, str] = {"openai-strict": "openai", "anthropic-strict": "anthropic"}
"""Each strict dialect, and the plain dialect of the provider that sends strict tools in it."""
_STRICT_FOR = {plain: strict for strict, plain in _STRICT_OF.items()}
"""Each provider's strict dialect."""

ENFORCED: dict[str, str] = {
    "openai": "provider-enforced (`strict: true`, OpenAI structured outputs)",
    "anthropic": "provider-enforced (`strict: true`, Anthropic strict tool use)",
    "gemini": "provider-validated (function calling mode `VALIDATED`, a preview feature) when "
    "the model may choose; with a forced choice (`ANY`), validated locally only",
}
"""What a `strict_schema` tool gets from each provider; local validation is on in every case."""


@dataclass(frozen=True)
class Finding:
    """One problem, printed as `file:line: level: tool: message [code]`."""

    file: str
    line: int
    level: Level
    code: str
    tool: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.level}: {self.tool}: {self.message} [{self.code}]"


def check_target(
    target: Target, dialects: Sequence[str] = DEFAULT_DIALECTS, profile: ModelProfile | None = None
) -> list[Finding]:
    """Every finding for the tools of `target`, tool by tool in registration order, checked
    against `profile`'s limits too when one is given."""
    fallback = (_module_file(target), 1)
    findings: list[Finding] = []
    seen: dict[str, tuple[str, int]] = {}
    items = list(target.value.tools) if isinstance(target.value, ToolService) else target.items()
    for item, found in tools_of(items):
        if isinstance(found, Exception):
            file, line = source_location(item) or fallback
            name = getattr(item, "__name__", type(item).__name__)
            message = f"cannot be made a tool: {found}".splitlines()[0]
            findings.append(Finding(file, line, "error", "invalid-tool", name, message))
            continue
        file, line = _tool_location(found) or fallback
        at = _Reporter(file, line, found.name)
        if found.name in seen:
            first = seen[found.name]
            at.error(
                "duplicate-name", f"duplicate tool name (also defined at {first[0]}:{first[1]})"
            )
        seen.setdefault(found.name, (file, line))
        _lint(found, dialects, at)
        if found.specification.strict_schema and profile is None:
            # (With a profile, `profile-strict` says whether the endpoint enforces it.)
            _strictness(found.specification, dialects, at)
        if profile is not None:
            _lint_profile(found, profile, len(seen), at)
        findings += at.findings
    return findings


@dataclass
class _Reporter:
    file: str
    line: int
    tool: str

    def __post_init__(self) -> None:
        self.findings: list[Finding] = []

    def error(self, code: str, message: str) -> None:
        self.findings.append(Finding(self.file, self.line, "error", code, self.tool, message))

    def warning(self, code: str, message: str) -> None:
        self.findings.append(Finding(self.file, self.line, "warning", code, self.tool, message))

    def note(self, code: str, message: str) -> None:
        self.findings.append(Finding(self.file, self.line, "note", code, self.tool, message))


def _returned_kinds(tool: ToolLike) -> frozenset[ContentKind]:
    """The kinds of parts a typed tool's return annotation says it may return (none known for
    other kinds of tools)."""
    if not isinstance(tool, Tool):
        return frozenset()
    return content_kinds(tool._signature.return_annotation)


def _returns(tool: ToolLike, kinds: Iterable[str]) -> str:
    """`returns image parts`; for a `ToolReturn`, whose content is not typed by kind, that it may
    return any."""
    if _untyped(tool):
        return "may return parts of any kind (a ToolReturn's content is not typed by kind)"
    return f"returns {_kinds(kinds)} parts"


def _untyped(tool: ToolLike) -> bool:
    return isinstance(tool, Tool) and returns_untyped_content(tool._signature.return_annotation)


def _kinds(kinds: Iterable[str]) -> str:
    return ", ".join(sorted(kinds))


def _lint(tool: ToolLike, dialects: Sequence[str], at: _Reporter) -> None:
    spec = tool.specification
    if isinstance(tool, Tool) and (problem := tool.unserializable_return()) is not None:
        at.error("unserializable-return", problem)
    if not spec.description.strip():
        at.warning("missing-description", "the tool has no description")
    kinds = _returned_kinds(tool)
    if kinds and "openai" in dialects:
        at.warning(
            "tool-result-content",
            f"{_returns(tool, kinds)}: Chat Completions tool messages carry text only, so "
            "they are sent in a user message after the tool results (adaptation "
            "`tool_result_content`)",
        )
    for name in _undescribed_parameters(spec.parameters):
        at.warning("missing-parameter-description", f"parameter {name!r} has no description")
    for contradiction in spec.annotations.contradictions() if spec.annotations else ():
        at.warning("contradictory-annotations", f"annotations contradict: {contradiction}")
    for dialect in dialects:
        rules = dialect_rules(dialect)
        plain = _STRICT_OF.get(dialect)
        if plain is not None and plain in dialects:
            # Names follow the same rules as in the plain dialect, checked there; and a tool
            # sent strict is already rendered strict there: one error is enough.
            if not spec.strict_schema:
                _lint_schema(spec, dialect, strict_only=True, at=at)
            continue
        if not rules.tool_name.fullmatch(spec.name):
            at.error(
                "invalid-name",
                f"name {spec.name!r} is invalid for {dialect}: {rules.tool_name_rule}",
            )
            continue
        if rules.property_name is not None:
            for key in spec.parameters.get("properties", {}):
                if not rules.property_name.fullmatch(key):
                    at.error(
                        "invalid-parameter-name",
                        f"parameter name {key!r} is invalid for {dialect}: "
                        f"{rules.property_name_rule}",
                    )
        _lint_schema(spec, dialect, strict_only=plain is not None, at=at)


def _lint_schema(
    spec: ToolSpecification, dialect: str, *, strict_only: bool, at: _Reporter
) -> None:
    """Report what `dialect` cannot express of the tool's schema."""
    try:
        declaration(spec, dialect)
        if dialect == "gemini":
            # What `GeminiChatModel(function_schema="gemini")` sends: the OpenAPI subset.
            render_schema(spec.parameters, "gemini")
    except SchemaDialectError as exc:
        # Opt-in renderings warn: strict mode for a tool that did not ask for it, and the
        # Gemini subset (by default that provider sends full JSON Schema).
        opt_in = dialect == "gemini" or (strict_only and not spec.strict_schema)
        report = at.warning if opt_in else at.error
        report(
            "unsupported-schema",
            f"not expressible in {exc.dialect} at {exc.path}: {exc.reason}",
        )


def _strictness(spec: ToolSpecification, dialects: Sequence[str], at: _Reporter) -> None:
    """A note saying what the tool's `strict_schema` gets from each provider checked (nothing
    from one whose strict dialect cannot express the schema: the error above says why)."""
    providers = dict.fromkeys(_STRICT_OF.get(dialect, dialect) for dialect in dialects)
    said = []
    for provider in providers:
        if provider not in ENFORCED:
            continue
        strict = _STRICT_FOR.get(provider)
        try:
            if strict is not None:
                declaration(spec, strict)
        except SchemaDialectError:
            said.append(f"{provider}: cannot be sent (not expressible in {strict})")
            continue
        said.append(f"{provider}: {ENFORCED[provider]}")
    if said:
        at.note("strictness", "strict schema: " + "; ".join(said))


def _lint_profile(tool: ToolLike, profile: ModelProfile, position: int, at: _Reporter) -> None:
    spec = tool.specification
    where = f"profile {profile.name!r}"
    if not profile.tools:
        at.error("profile-tools", f"{where}: the model does not call tools")
        return
    if profile.max_tools is not None and position == profile.max_tools + 1:
        at.error("profile-max-tools", f"{where}: at most {profile.max_tools} tools per request")
    if spec.strict_schema and not profile.strict_schema:
        at.warning(
            "profile-strict",
            f"{where}: strict schemas are not supported; sent plain, validated locally",
        )
    _lint_profile_content(tool, profile, where, at)
    moved: list[str] = []
    try:
        move_keywords(
            render_schema(spec.parameters, "openai"),
            profile.refused_schema_keywords,
            moved,
            spec.name,
        )
    except UnsupportedFeatureError as exc:
        at.error("profile-schema", f"{where}: {exc}")
        return
    if moved:
        at.warning(
            "profile-schema",
            f"{where}: refuses {', '.join(sorted(set(moved)))}; moved into descriptions when sent",
        )


def _lint_profile_content(tool: ToolLike, profile: ModelProfile, where: str, at: _Reporter) -> None:
    unsent = _returned_kinds(tool) - profile.tool_result_content
    if not unsent:
        return
    if _untyped(tool):
        where += " (for the parts a ToolReturn may hold)"
    if profile.policy_for("tool_result_content") == "error":
        at.error(
            "profile-content",
            f"{where}: tool results carry no {_kinds(unsent)} parts, and its policy refuses "
            "the request",
        )
        return
    moved, left_out = unsent & profile.user_content, unsent - profile.user_content
    if moved:
        at.warning(
            "profile-content",
            f"{where}: tool results carry no {_kinds(moved)} parts; sent in a user message after "
            "the tool results",
        )
    if left_out:
        at.warning(
            "profile-content", f"{where}: takes no {_kinds(left_out)} parts; left out when sent"
        )


def _undescribed_parameters(parameters: dict[str, Any]) -> Iterator[str]:
    defs = parameters.get("$defs", {})
    for name, schema in parameters.get("properties", {}).items():
        if not isinstance(schema, dict) or not _described(schema, defs):
            yield name


def _described(schema: dict[str, Any], defs: dict[str, Any]) -> bool:
    """A description on the property, or on the model it refers to (its docstring)."""
    if str(schema.get("description", "")).strip():
        return True
    refs = [schema.get("$ref")] + [
        s.get("$ref") for s in schema.get("allOf", ()) if isinstance(s, dict)
    ]
    for ref in refs:
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            target = defs.get(ref.removeprefix("#/$defs/"), {})
            if str(target.get("description", "")).strip():
                return True
    return False


def _tool_location(tool: ToolLike) -> tuple[str, int] | None:
    location = source_location(tool)
    if location is None:
        # A tool with no function of its own (a JSON-schema tool): point at its handler.
        handler = getattr(tool, "_function", None)
        location = source_location(handler) if handler is not None else None
    return location


def _module_file(target: Target) -> str:
    file = getattr(target.module, "__file__", None)
    return display_path(file) if file else target.module.__name__
