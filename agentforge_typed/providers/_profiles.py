"""`ModelProfile`: what one model behind one OpenAI-compatible endpoint supports, and the built-in
profiles of the compatible servers people run.

Protocol support is not model support: the same endpoint may accept `tool_choice="required"` for
one model and answer 400 for the next, stream tool calls whole, or put reasoning in a field of its
own. A profile says so up front, so that a request asking for something unsupported is adapted by
a documented rule or refused before it is sent (see `_degrade.py`), never silently degraded.
`agentforge-typed probe` measures a profile against a live endpoint and writes it as JSON.
"""

from __future__ import annotations

import os
from collections.abc import Set
from pathlib import Path
from typing import Annotated, Literal, TypeVar, get_args

from pydantic import AfterValidator, Field, field_serializer

from .._frozen import FrozenModel

__all__ = [
    "FEATURES",
    "PROFILES",
    "Feature",
    "ModelProfile",
    "Policy",
    "ToolChoiceMode",
    "resolve_profile",
]

ToolChoiceMode = Literal["auto", "required", "named", "none"]
"""A `tool_choice` mode: the three keywords, and `named` for forcing one tool by its name."""

Feature = Literal[
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "strict_schema",
    "schema_keywords",
    "stream_tool_deltas",
    "stream_usage",
    "system_message",
    "max_tools",
]
"""A feature a request may ask for that a profile may lack; the keys of `ModelProfile.policy`."""

FEATURES: tuple[Feature, ...] = get_args(Feature)
"""Every `Feature`, in declaration order."""

Policy = Literal["adapt", "error"]
"""What to do with a request that asks for an unsupported feature: adapt it by the feature's
documented rule (and record that on the response), or raise `UnsupportedFeatureError`."""

T = TypeVar("T")

_FrozenSet = Annotated[Set[T], AfterValidator(frozenset)]
"""Accepts any set (a plain `set` is fine for callers and mypy) and stores a `frozenset`."""

_ALL_CHOICES: frozenset[ToolChoiceMode] = frozenset({"auto", "required", "named", "none"})

STRUCTURAL_KEYWORDS = frozenset(
    {"type", "$ref", "$defs", "properties", "items", "anyOf", "oneOf", "allOf", "enum", "const"}
)
"""Schema keywords that carry a type: an endpoint refusing one cannot be adapted to (dropping it
would widen the type), so a tool using it is refused."""


class ModelProfile(FrozenModel):
    """What a model behind an endpoint supports. The defaults describe OpenAI itself.

    Load one from a file `agentforge-typed probe --write` made with `ModelProfile.load(path)`, or
    derive one: `PROFILES["ollama"].model_copy(update={"policy": {"tool_choice": "error"}})`.
    """

    name: str = "custom"
    """A label for error messages and the recorded adaptations."""
    tools: bool = True
    """Whether tool calling works at all."""
    tool_choice: _FrozenSet[ToolChoiceMode] = _ALL_CHOICES
    """The `tool_choice` modes the endpoint accepts."""
    parallel_tool_calls_parameter: bool = True
    """Whether the `parallel_tool_calls` parameter is accepted and honoured."""
    parallel_tool_calls: bool = True
    """Whether the model makes several calls in one answer (informational)."""
    stream_tool_deltas: bool = True
    """Whether streamed tool calls arrive as argument deltas; without, the endpoint sends whole
    calls, or none at all, in a stream."""
    stream_tool_index: bool = True
    """Whether streamed tool-call pieces carry `index` (informational: the stream parser copes
    without it)."""
    strict_schema: bool = True
    """Whether `strict: true` tool schemas are accepted and enforced (a probe sets it only when
    the model, asked for a value outside a strict enum, still sent the allowed one)."""
    refused_schema_keywords: _FrozenSet[str] = frozenset()
    """JSON Schema keywords the endpoint rejects in tool schemas."""
    reasoning_field: Literal["reasoning_content", "reasoning"] | None = None
    """Where the model's reasoning arrives (informational: both are read)."""
    stream_usage: bool = True
    """Whether `stream_options: {"include_usage": true}` is accepted (token usage in streams)."""
    max_tools: Annotated[int, Field(ge=0)] | None = 128
    """The most tools one request may offer; `None`: no known limit (what a probe reports when
    all the 1024 tools it tries are accepted)."""
    system_message: Literal["any", "first", "none"] = "any"
    """Where system messages may stand: anywhere, only first (many chat templates raise on a
    later one), or nowhere (no system role)."""
    policy: dict[Feature, Policy] = Field(default_factory=dict)
    """Per feature, `"adapt"` or `"error"`; a feature not named takes its default (`"adapt"`,
    except `tools` and `max_tools`, which have no adaptation and always raise)."""

    @field_serializer("tool_choice", "refused_schema_keywords")
    def _sorted(self, value: Set[str]) -> list[str]:
        # Sets as sorted lists: a profile file written twice reads the same.
        return sorted(value)

    def policy_for(self, feature: Feature) -> Policy:
        """The policy this profile applies to `feature`."""
        if feature in ("tools", "max_tools"):
            return "error"
        return self.policy.get(feature, "adapt")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ModelProfile:
        """Read a profile from a JSON file (as `probe --write` writes one)."""
        return cls.model_validate_json(Path(path).read_bytes())

    def dump(self, path: str | os.PathLike[str]) -> None:
        """Write this profile as a JSON file that `load` reads back."""
        Path(path).write_text(self.model_dump_json(indent=2) + "\n", encoding="utf-8")


def resolve_profile(profile: ModelProfile | str | os.PathLike[str] | None) -> ModelProfile | None:
    """A `ModelProfile` from itself, a built-in name (`"ollama"`), or the path of a JSON file.

    Raises:
        ValueError: a string that is neither a built-in name nor an existing file.
    """
    if profile is None or isinstance(profile, ModelProfile):
        return profile
    if isinstance(profile, str) and profile in PROFILES:
        return PROFILES[profile]
    if Path(profile).is_file():
        return ModelProfile.load(profile)
    known = ", ".join(sorted(PROFILES))
    raise ValueError(f"unknown profile {str(profile)!r}: a JSON file, or one of {known}")


def _profile(name: str, **fields: object) -> ModelProfile:
    """A compatible server's profile: strict schemas are OpenAI's own, so off unless stated."""
    return ModelProfile.model_validate({"name": name, "strict_schema": False, **fields})


_LOCAL = {"max_tools": None}
"""Local servers set no tool limit of their own (the context window is the limit)."""

PROFILES: dict[str, ModelProfile] = {
    "openai": ModelProfile(name="openai"),
    # https://api-docs.deepseek.com/api/create-chat-completion: tools "a max of 128 functions",
    # tool_choice none/auto/required/named, no `parallel_tool_calls` field; strict mode only on
    # the /beta base URL (https://api-docs.deepseek.com/guides/function_calling); reasoning in
    # `reasoning_content` (https://api-docs.deepseek.com/guides/reasoning_model).
    "deepseek": _profile(
        "deepseek",
        parallel_tool_calls_parameter=False,
        reasoning_field="reasoning_content",
    ),
    # https://help.aliyun.com/zh/model-studio/qwen-function-calling: tool_choice auto, none and
    # a named function ("required" is not offered); qwen3/QwQ reasoning in `reasoning_content`;
    # Qwen's chat templates raise "System message must be at the beginning."
    "dashscope": _profile(
        "dashscope",
        tool_choice={"auto", "none", "named"},
        reasoning_field="reasoning_content",
        system_message="first",
    ),
    # https://platform.moonshot.ai/docs/api/tool-use: "tool_choice ... required is not supported
    # for now"; at most 128 tools; kimi thinking models send `reasoning_content`.
    "moonshot": _profile(
        "moonshot",
        tool_choice={"auto", "none"},
        parallel_tool_calls_parameter=False,
        reasoning_field="reasoning_content",
    ),
    # https://platform.minimax.io/docs/api-reference/text-openai-api: tools with tool_choice
    # auto/none only; no parallel_tool_calls or strict fields documented.
    "minimax": _profile(
        "minimax",
        tool_choice={"auto", "none"},
        parallel_tool_calls_parameter=False,
    ),
    # https://console.groq.com/docs/tool-use and /docs/openai: tool_choice and
    # parallel_tool_calls supported, at most 128 tools, `strict` not enforced on tools;
    # reasoning models send `reasoning` (reasoning_format "parsed").
    "groq": _profile("groq", reasoning_field="reasoning"),
    # https://docs.together.ai/docs/function-calling: auto/required/named/none; no strict mode.
    "together": _profile("together", reasoning_field="reasoning"),
    # https://docs.mistral.ai/capabilities/function_calling/: tool_choice auto/none/any/required
    # and named, parallel_tool_calls accepted; no strict tool schemas (reasoning arrives as
    # `thinking` content parts, which the wire reads).
    "mistral": _profile("mistral"),
    # https://openrouter.ai/docs/features/tool-calling: passes tool_choice/parallel_tool_calls to
    # the routed provider; reasoning as `reasoning` (https://openrouter.ai/docs/use-cases/reasoning-tokens).
    "openrouter": _profile("openrouter", reasoning_field="reasoning"),
    # https://github.com/ollama/ollama/blob/main/docs/openai.md: `tool_choice` and
    # `parallel_tool_calls` are not among the supported fields; tool calls are sent whole in
    # one chunk, not as argument deltas (ollama/ollama#7886); reasoning as `reasoning`.
    "ollama": _profile(
        "ollama",
        tool_choice={"auto"},
        parallel_tool_calls_parameter=False,
        stream_tool_deltas=False,
        reasoning_field="reasoning",
        **_LOCAL,
    ),
    # https://docs.vllm.ai/en/latest/features/tool_calling.html: auto/required/named/none
    # (required since 0.8.3); `parallel_tool_calls` is ignored by most tool parsers; `strict` is
    # ignored; reasoning parsers fill `reasoning_content` (`reasoning` in newer releases); Qwen
    # and Llama chat templates refuse a system message after the first.
    "vllm": _profile(
        "vllm",
        parallel_tool_calls_parameter=False,
        reasoning_field="reasoning_content",
        system_message="first",
        **_LOCAL,
    ),
    # https://github.com/ggml-org/llama.cpp/blob/master/docs/function-calling.md: tool calls need
    # --jinja; tool_choice auto/required/none (no named choice); `parallel_tool_calls` accepted;
    # reasoning in `reasoning_content` (--reasoning-format deepseek); templates as for vLLM.
    "llamacpp": _profile(
        "llamacpp",
        tool_choice={"auto", "required", "none"},
        reasoning_field="reasoning_content",
        system_message="first",
        **_LOCAL,
    ),
    # https://docs.litellm.ai/docs/completion/function_call: the proxy forwards tool fields to
    # the backend and normalises reasoning to `reasoning_content`
    # (https://docs.litellm.ai/docs/reasoning_content); limits are the backend's.
    "litellm": _profile(
        "litellm", strict_schema=True, reasoning_field="reasoning_content", **_LOCAL
    ),
    # https://lmstudio.ai/docs/app/api/tools: tool_choice auto/none/required; no
    # parallel_tool_calls; reasoning in `reasoning_content` when separated (app setting).
    "lmstudio": _profile(
        "lmstudio",
        tool_choice={"auto", "required", "none"},
        parallel_tool_calls_parameter=False,
        reasoning_field="reasoning_content",
        **_LOCAL,
    ),
    # https://ai.google.dev/gemini-api/docs/openai: tool_choice supported, no
    # parallel_tool_calls; streamed tool calls arrive whole and without `index`; function
    # parameters are an OpenAPI subset (https://ai.google.dev/api/caching#Schema) that rejects
    # these keywords.
    "gemini-openai": _profile(
        "gemini-openai",
        parallel_tool_calls_parameter=False,
        stream_tool_deltas=False,
        stream_tool_index=False,
        refused_schema_keywords={
            "additionalProperties",
            "exclusiveMinimum",
            "exclusiveMaximum",
            "multipleOf",
            "patternProperties",
        },
    ),
}
"""The built-in profiles, by name; each entry cites where its values come from."""
