"""`get_model`: a `ChatModel` from a short name such as `"openai:gpt-4o-mini"`.

The name picks the provider; everything else (API keys, base URLs) comes from the environment,
read by the provider itself, so a name is safe to put in configuration files and command lines.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from .._model import ChatModel

__all__ = ["KNOWN_MODEL_PREFIXES", "get_model"]

_PROVIDERS: dict[str, tuple[str, str]] = {
    "openai": (".openai", "OpenAIChatModel"),
    "openai-responses": (".openai_responses", "OpenAIResponsesModel"),
    "anthropic": (".anthropic", "AnthropicChatModel"),
}
"""One entry per provider prefix: the module and class `"<prefix>:<model>"` builds, imported on
first use (so that listing the prefixes, as `--help` does, loads no provider and no httpx)."""

KNOWN_MODEL_PREFIXES = (*(f"{prefix}:<model>" for prefix in _PROVIDERS), "fake")
"""The model names `get_model` understands, as shown in its error message."""


def get_model(name: str, **options: Any) -> ChatModel:
    """Build the `ChatModel` that `name` designates.

    - `"openai:<model>"`: `OpenAIChatModel(<model>)`; the key and endpoint come from
      `OPENAI_API_KEY` and `OPENAI_BASE_URL` (any OpenAI-compatible server).
    - `"openai-responses:<model>"`: `OpenAIResponsesModel(<model>)`, OpenAI's Responses API;
      the same environment variables.
    - `"anthropic:<model>"`: `AnthropicChatModel(<model>)`; `ANTHROPIC_API_KEY`,
      `ANTHROPIC_BASE_URL`.
    - `"fake"`: `FakeModel()`, offline and deterministic.

    Only the first `:` separates the provider, so fine-tuned names such as
    `"openai:ft:gpt-4o-mini:acme::abc123"` pass through whole.

    Args:
        name: The model name.
        **options: Passed to the model's constructor (`http_client=`, `max_retries=`,
            `temperature=`, …).

    Raises:
        ValueError: `name` has no known provider prefix or no model after the prefix.
        ModelError: The provider needs an API key and none is set.
    """
    if name == "fake":
        from ._fake import FakeModel

        if options:
            raise TypeError(f"the fake model takes no options, got {', '.join(sorted(options))}")
        return FakeModel()
    provider, colon, model = name.partition(":")
    entry = _PROVIDERS.get(provider.strip().lower()) if colon else None
    if entry is None:
        known = ", ".join(repr(prefix) for prefix in KNOWN_MODEL_PREFIXES)
        raise ValueError(f"unknown model {name!r}: expected one of {known}")
    if not model.strip():
        raise ValueError(f"model name missing after {provider + ':'!r} in {name!r}")
    module, class_name = entry
    factory: Callable[..., ChatModel] = getattr(
        importlib.import_module(module, __package__), class_name
    )
    return factory(model.strip(), **options)
