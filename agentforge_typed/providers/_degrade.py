"""Explicit degradation, sans-IO: a request adapted to what a `ModelProfile` says the model
supports, before the wire maps it.

Each unsupported feature a request asks for is either adapted by one documented rule, recorded
as an adaptation (which the model puts on the response's `metadata["adaptations"]`), or refused
with `UnsupportedFeatureError` before anything is sent, as the profile's policy for the feature
says. Nothing is degraded silently.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from pydantic_core import from_json, to_json

from .._content import BinaryContent, Content, ContentKind, content_text
from .._exceptions import UnsupportedFeatureError
from .._messages import ChatMessage, SystemMessage, TextContent, ToolResultMessage, UserMessage
from .._request import ChatRequestParameters, ToolChoice, ToolSpecification
from ._dialects import _SCHEMA_LIST_KEYS, _SCHEMA_MAP_KEYS, _SCHEMA_VALUE_KEYS, _describe, _note
from ._profiles import STRUCTURAL_KEYWORDS, Feature, ModelProfile, ToolChoiceMode

__all__ = [
    "Adapted",
    "PartRefusal",
    "adapt_request",
    "fit_content",
    "fit_tool_parts",
    "move_keywords",
    "with_json_arguments",
]

INVALID_JSON = "INVALID_JSON"
"""The key of the stand-in sent for a historical tool call whose arguments are not JSON."""

REQUIRED_NOTE = "You must call one of the offered tools in your next answer, not answer in text."
ONE_CALL_NOTE = "Call at most one tool per answer."


def _named_note(name: str) -> str:
    return f"You must call the tool `{name}` in your next answer."


@dataclass
class Adapted:
    """A request as it will be sent, and what was changed to get there."""

    messages: list[ChatMessage]
    parameters: ChatRequestParameters
    adaptations: list[dict[str, str]] = field(default_factory=list)
    """One `{"feature": ..., "rule": ...}` per change, in the order they were made."""
    buffered: bool = False
    """A stream to answer from one blocking call: the endpoint does not stream tool calls."""


def adapt_request(
    profile: ModelProfile,
    messages: Sequence[ChatMessage],
    parameters: ChatRequestParameters,
    *,
    stream: bool,
) -> Adapted:
    """`messages` and merged `parameters` adapted to `profile`.

    Raises:
        UnsupportedFeatureError: a feature the profile lacks whose policy is `"error"`, or that
            has no adaptation (tools at all, too many tools, a refused keyword that carries a type).
    """
    run = _Adapter(profile, Adapted(list(messages), parameters))
    run.tools()
    run.response_format()
    run.system_placement()
    if stream:
        run.stream()
    return run.out


def with_json_arguments(adapted: Adapted) -> Adapted:
    """`adapted` with every historical tool call's arguments sent as JSON: arguments that do not
    parse (a call cut off mid-way, a model's malformed stream) go as `{"INVALID_JSON": <the
    text>}`, so the model still sees what it sent, and the change is recorded. Servers parse the
    history's arguments (llama.cpp answers 500 to one that is not JSON, and a retry cannot help),
    while the history itself keeps the text as the model wrote it."""
    messages = adapted.messages
    for position, message in enumerate(messages):
        if message.role != "assistant" or not message.tool_calls:
            continue
        if all(_is_json(call.arguments) for call in message.tool_calls):
            continue
        calls = tuple(
            call
            if _is_json(call.arguments)
            else call.model_copy(
                update={"arguments": to_json({INVALID_JSON: call.arguments}).decode()}
            )
            for call in message.tool_calls
        )
        messages[position] = message.model_copy(update={"tool_calls": calls})
        if not any(a["feature"] == "tool_call_arguments" for a in adapted.adaptations):
            adapted.adaptations.append(
                {
                    "feature": "tool_call_arguments",
                    "rule": 'arguments that are not JSON sent as {"INVALID_JSON": <the text>}',
                }
            )
    return adapted


PartRefusal = Callable[[BinaryContent], "str | None"]
"""A wire's `refuse_part`: why its API cannot take a part whose kind it takes (by the part's
source or format), as a phrase after "the endpoint", or `None`."""


def fit_content(
    adapted: Adapted,
    user: Set[ContentKind],
    tool: Set[ContentKind],
    profile: ModelProfile | None = None,
    refuse: PartRefusal | None = None,
) -> Adapted:
    """`adapted` with every part beyond text where the endpoint takes it: in a tool result when
    its kind is in `tool`; else, when its kind is in `user`, in a user message right after the
    tool results, which says which call returned it (the way Chat Completions documents for
    tool messages, which carry text only); else left out, a text stand-in saying what was. User
    message parts of a kind not in `user` are left out the same way, and so is a part the API
    cannot take by its source or format (`refuse`: a document by URL where only inline data
    goes); a `data:` URL that is not base64 is sent as base64. Each change is recorded
    (features `tool_result_content` and `user_content`), or refused with
    `UnsupportedFeatureError` where `profile`'s policy for the feature is `"error"`."""
    messages = adapted.messages
    if not any(_has_parts(message) for message in messages):
        return adapted
    fitted: list[ChatMessage] = []
    moved: list[Content] = []
    changes: dict[Feature, set[str]] = {}
    for message in messages:
        if moved and not isinstance(message, ToolResultMessage):
            fitted.append(UserMessage(content=moved))
            moved = []
        if isinstance(message, ToolResultMessage) and message.content:
            fitted.append(_fit_result(message, user, tool, refuse, moved, changes))
        elif isinstance(message, UserMessage) and not isinstance(message.content, str):
            parts = [_fit_user_part(part, user, refuse, changes) for part in message.content]
            changed = any(new is not old for new, old in zip(parts, message.content, strict=True))
            fitted.append(
                message.model_copy(update={"content": tuple(parts)}) if changed else message
            )
        else:
            fitted.append(message)
    if moved:
        fitted.append(UserMessage(content=moved))
    for feature, rules in changes.items():
        _record(adapted, profile, feature, "; ".join(sorted(rules)))
    adapted.messages = fitted
    return adapted


def fit_tool_parts(
    parts: Sequence[Content],
    user: Set[ContentKind],
    tool: Set[ContentKind],
    profile: ModelProfile | None = None,
    refuse: PartRefusal | None = None,
) -> tuple[tuple[Content, ...], tuple[str, ...]]:
    """A tool result's `parts` decided at the tool result, as `fit_content` would send them: a
    part the endpoint takes nowhere (neither in a tool result nor in a user message) replaced by
    its note, a `data:` URL that is not base64 as base64, the rest as they are (moving a part
    into a user message is the request's business); and the notes. So the history records what
    the model will read, and no later request fails on it.

    Raises:
        UnsupportedFeatureError: a part `fit_content` would move or leave out, under `profile`'s
            `"error"` policy for `tool_result_content`.
    """
    kept: list[Content] = []
    notes: list[str] = []
    rules: set[str] = set()
    for old in parts:
        if isinstance(old, TextContent):
            kept.append(old)
            continue
        part, place = _place(old, user, tool, refuse)
        if place in ("tool", "user"):
            kept.append(part)
            if place == "user":
                rules.add(_moved_rule(part))
            continue
        rules.add(_left_out_rule(part, place))
        notes.append(_left_out(part, place))
        kept.append(TextContent(text=notes[-1]))
    if rules and profile is not None and profile.policy_for("tool_result_content") == "error":
        _refuse(profile, "tool_result_content", "; ".join(sorted(rules)))
    return tuple(kept), tuple(notes)


def _record(adapted: Adapted, profile: ModelProfile | None, feature: Feature, rule: str) -> None:
    if profile is not None and profile.policy_for(feature) == "error":
        _refuse(profile, feature, rule)
    adapted.adaptations.append({"feature": feature, "rule": rule})


def _refuse(profile: ModelProfile, feature: Feature, rule: str) -> None:
    raise UnsupportedFeatureError(
        feature, f"profile {profile.name!r} does not support {feature}: {rule}"
    )


def _has_parts(message: ChatMessage) -> bool:
    if isinstance(message, ToolResultMessage):
        return bool(message.content)
    return isinstance(message, UserMessage) and not isinstance(message.content, str)


_Place = Literal["tool", "user"]
_PartT = TypeVar("_PartT", bound=BinaryContent)


def _place(
    part: _PartT,
    user: Set[ContentKind],
    tool: Set[ContentKind],
    refuse: PartRefusal | None,
) -> tuple[_PartT, _Place | str]:
    """Where a tool's `part` (as it will be sent) goes: in the tool result, in a user message
    after it, or nowhere, and why (a phrase after "the endpoint")."""
    part = _as_sent(part)
    refused = None if refuse is None else refuse(part)
    if refused is None and part.kind in tool:
        return part, "tool"
    if refused is None and part.kind in user:
        return part, "user"
    return part, refused or f"does not take {_PLURAL[part.kind]}"


def _as_sent(part: _PartT) -> _PartT:
    """`part`, its `data:` URL as inline data when it is not base64 (the only form every API
    takes)."""
    if part.url is None or not part.url.startswith("data:") or part.base64_data() is not None:
        return part
    header = part.url[len("data:") :].partition(",")[0]
    media_type = part.media_type or header.partition(";")[0] or "text/plain"
    return part.model_copy(update={"url": None, "data": part.url_bytes(), "media_type": media_type})


def _fit_result(
    message: ToolResultMessage,
    user: Set[ContentKind],
    tool: Set[ContentKind],
    refuse: PartRefusal | None,
    moved: list[Content],
    changes: dict[Feature, set[str]],
) -> ToolResultMessage:
    kept: list[Content] = []
    here: list[Content] = []
    for old in message.content:
        if isinstance(old, TextContent):
            kept.append(old)
            continue
        part, place = _place(old, user, tool, refuse)
        if place == "tool":
            kept.append(part)
        elif place == "user":
            here.append(part)
            kept.append(TextContent(text=f"{part.describe()} (in the next user message)"))
            changes.setdefault("tool_result_content", set()).add(_moved_rule(part))
        else:
            kept.append(TextContent(text=_left_out(part, place)))
            changes.setdefault("tool_result_content", set()).add(_left_out_rule(part, place))
    if here:
        intro = f"Content returned by the tool call {message.tool_call_id} ({message.tool_name}):"
        moved += [TextContent(text=intro), *here]
    if len(kept) == len(message.content) and all(
        new is old for new, old in zip(kept, message.content, strict=True)
    ):
        return message
    if all(isinstance(part, TextContent) for part in kept):
        return message.model_copy(update={"text": content_text(kept), "content": ()})
    return message.model_copy(update={"text": content_text(kept), "content": tuple(kept)})


def _moved_rule(part: BinaryContent) -> str:
    return f"{_PLURAL[part.kind]} returned by tools sent in a user message after the tool results"


def _left_out_rule(part: BinaryContent, why: str) -> str:
    reason = "takes none" if why.startswith("does not take") else why
    return f"{_PLURAL[part.kind]} returned by tools left out: the endpoint {reason}"


def _fit_user_part(
    old: Content,
    user: Set[ContentKind],
    refuse: PartRefusal | None,
    changes: dict[Feature, set[str]],
) -> Content:
    if isinstance(old, TextContent):
        return old
    part = _as_sent(old)
    refused = None if refuse is None else refuse(part)
    if refused is None and part.kind in user:
        return part
    why = refused or f"does not take {_PLURAL[part.kind]}"
    reason = "takes none" if refused is None else refused
    changes.setdefault("user_content", set()).add(
        f"{_PLURAL[part.kind]} in user messages left out: the endpoint {reason}"
    )
    return TextContent(text=_left_out(part, why))


def _left_out(part: BinaryContent, why: str) -> str:
    return f"{part.describe()} (left out: the model's endpoint {why})"


_PLURAL: dict[ContentKind, str] = {
    "image": "images",
    "document": "documents",
    "audio": "audio",
    "file": "files",
}


def _is_json(arguments: str) -> bool:
    if not arguments.strip():
        return True  # no arguments: each wire sends its empty form
    try:
        from_json(arguments)
    except ValueError:
        return False
    return True


@dataclass
class _Adapter:
    profile: ModelProfile
    out: Adapted
    notes: list[str] = field(default_factory=list)

    def change(self, feature: Feature, rule: str) -> None:
        """Record one adaptation, or raise when the feature's policy forbids adapting."""
        if self.profile.policy_for(feature) == "error":
            raise UnsupportedFeatureError(
                feature, f"profile {self.profile.name!r} does not support {feature}: {rule}"
            )
        self.out.adaptations.append({"feature": feature, "rule": rule})

    def update(self, **fields: Any) -> None:
        self.out.parameters = self.out.parameters.model_copy(update=fields)

    def tools(self) -> None:
        parameters = self.out.parameters
        if not parameters.tools:
            return
        profile = self.profile
        if not profile.tools:
            self.change("tools", "the model does not call tools; none can be offered")
        if profile.max_tools is not None and len(parameters.tools) > profile.max_tools:
            self.change(
                "max_tools",
                f"{len(parameters.tools)} tools offered, at most {profile.max_tools} accepted",
            )
        self.tool_choice()
        if not self.out.parameters.tools:
            return
        if parameters.parallel_tool_calls is not None and not profile.parallel_tool_calls_parameter:
            one = parameters.parallel_tool_calls is False
            self.change(
                "parallel_tool_calls",
                "parallel_tool_calls not sent"
                + (", with an instruction in the system prompt" if one else ""),
            )
            self.update(parallel_tool_calls=None)
            if one:
                self.notes.append(ONE_CALL_NOTE)
        self.schemas()
        if self.notes:
            self.out.messages = _with_system_note(self.out.messages, " ".join(self.notes))

    def tool_choice(self) -> None:
        choice = self.out.parameters.tool_choice
        if choice is None:
            return
        mode: ToolChoiceMode = choice.value if isinstance(choice, ToolChoice) else "named"
        supported = self.profile.tool_choice
        if mode in supported:
            return
        # Without `auto` in the profile the field is left out: `auto` is every server's default.
        fallback = ToolChoice.AUTO if "auto" in supported else None
        if mode == "none":
            self.change("tool_choice", "none: the tools are not sent")
            self.update(tools=None, tool_choice=None, parallel_tool_calls=None)
        elif mode == "required":
            self.change(
                "tool_choice",
                f"required → {fallback or 'not sent'}, with an instruction in the system prompt",
            )
            self.update(tool_choice=fallback)
            self.notes.append(REQUIRED_NOTE)
        elif mode == "named":
            assert isinstance(choice, str)
            only = [spec for spec in self.out.parameters.tools or () if spec.name == choice]
            forced = ToolChoice.REQUIRED if "required" in supported else fallback
            self.change(
                "tool_choice",
                f"named {choice!r} → {forced or 'not sent'} with only that tool offered"
                + ("" if forced is ToolChoice.REQUIRED else ", and an instruction"),
            )
            self.update(tools=only or self.out.parameters.tools, tool_choice=forced)
            if forced is not ToolChoice.REQUIRED:
                self.notes.append(_named_note(choice))
        else:
            self.change("tool_choice", "auto → not sent (the server's default)")
            self.update(tool_choice=None)

    def schemas(self) -> None:
        profile = self.profile
        specs = list(self.out.parameters.tools or ())
        strict = [spec.name for spec in specs if spec.strict_schema]
        if strict and not profile.strict_schema:
            self.change(
                "strict_schema",
                f"plain schemas sent for {', '.join(strict)}; arguments are still validated "
                "locally",
            )
            specs = [spec.model_copy(update={"strict_schema": False}) for spec in specs]
        refused = profile.refused_schema_keywords
        if refused:
            specs = [self.keywords(spec, refused) for spec in specs]
        self.update(tools=specs)

    def response_format(self) -> None:
        response_format = self.out.parameters.response_format
        if response_format is None or not response_format.strict or self.profile.strict_schema:
            return
        self.change("strict_schema", "response_format sent without strict")
        self.update(response_format=response_format.model_copy(update={"strict": False}))

    def keywords(self, spec: ToolSpecification, refused: Set[str]) -> ToolSpecification:
        moved: list[str] = []
        parameters = move_keywords(spec.parameters, refused, moved, spec.name)
        if not moved:
            return spec
        self.change(
            "schema_keywords",
            f"{', '.join(sorted(set(moved)))} of {spec.name!r} moved into descriptions; "
            "arguments are still validated locally",
        )
        return spec.model_copy(update={"parameters": parameters})

    def system_placement(self) -> None:
        placement = self.profile.system_message
        messages = self.out.messages
        systems = [m for m in messages if isinstance(m, SystemMessage)]
        if placement == "any" or not systems:
            return
        rest: list[ChatMessage] = [m for m in messages if not isinstance(m, SystemMessage)]
        if placement == "first":
            if len(systems) == 1 and messages[0] is systems[0]:
                return
            self.change("system_message", "system messages merged into one, first")
            merged = SystemMessage(text="\n\n".join(m.text for m in systems))
            self.out.messages = [merged, *rest]
            return
        self.change("system_message", "system text moved into the first user message")
        text = "\n\n".join(m.text for m in systems)
        first = next((i for i, m in enumerate(rest) if isinstance(m, UserMessage)), None)
        if first is None:
            rest.insert(0, UserMessage(content=text))
        else:
            user = rest[first]
            assert isinstance(user, UserMessage)
            content: Any = (
                f"{text}\n\n{user.content}"
                if isinstance(user.content, str)
                else [TextContent(text=text), *user.content]
            )
            rest[first] = user.model_copy(update={"content": content})
        self.out.messages = rest

    def stream(self) -> None:
        parameters = self.out.parameters
        if parameters.tools and not self.profile.stream_tool_deltas:
            self.change(
                "stream_tool_deltas",
                "answered from one blocking call: the endpoint does not stream tool calls",
            )
            self.out.buffered = True
        elif not self.profile.stream_usage:
            self.change("stream_usage", "stream_options not sent: no token usage in the stream")


def _with_system_note(messages: list[ChatMessage], note: str) -> list[ChatMessage]:
    """`note` appended to the leading system message, or as a new one first."""
    if messages and isinstance(messages[0], SystemMessage):
        return [SystemMessage(text=f"{messages[0].text}\n\n{note}"), *messages[1:]]
    return [SystemMessage(text=note), *messages]


def move_keywords(node: Any, refused: Set[str], moved: list[str], where: str) -> Any:
    """`node` with each refused constraint keyword moved into its description (so the model still
    reads it); a refused keyword that carries a type cannot move and is refused."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    notes: list[str] = []
    for key, value in node.items():
        if key in refused:
            if key in STRUCTURAL_KEYWORDS:
                raise UnsupportedFeatureError(
                    "schema_keywords",
                    f"tool {where!r} uses {key!r}, which the endpoint refuses and which cannot "
                    "be dropped without changing the type",
                )
            moved.append(key)
            notes.append(_note(key, value))
        elif key in _SCHEMA_MAP_KEYS and isinstance(value, dict):
            out[key] = {k: move_keywords(v, refused, moved, where) for k, v in value.items()}
        elif key in _SCHEMA_LIST_KEYS and isinstance(value, list):
            out[key] = [move_keywords(v, refused, moved, where) for v in value]
        elif key in _SCHEMA_VALUE_KEYS:
            out[key] = move_keywords(value, refused, moved, where)
        else:
            out[key] = value
    _describe(out, notes)
    return out
