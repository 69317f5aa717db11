"""`get_model`: a `ChatModel` from a short name such as `"openai:gpt-4o-mini"`.

The name picks the provider; everything else (API keys, base URLs) comes from the environment,
read by the provider itself, so a name is safe to put in configuration files and command lines.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._model import ChatModel

__all__ = ["KNOWN_MODEL_PREFIXES", "get_model"]


def _openai(model: str, options: dict[str, Any]) -> ChatModel:
    from .openai import OpenAIChatModel

    return OpenAIChatModel(model, **options)


def _anthropic(model: str, options: dict[str, Any]) -> ChatModel:
    from .anthropic import AnthropicChatModel

    return AnthropicChatModel(model, **options)


def _google(model: str, options: dict[str, Any]) -> ChatModel:
    from .gemini import GeminiChatModel

    return GeminiChatModel(model, **options)


_PROVIDERS: dict[str, Callable[[str, dict[str, Any]], ChatModel]] = {
    "openai": _openai,
    "anthropic": _anthropic,
    "google": _google,
    "gemini": _google,
}

KNOWN_MODEL_PREFIXES = ("openai:<model>", "anthropic:<model>", "google:<model>", "fake")
"""The model names `get_model` understands, as shown in its error message."""


def get_model(name: str, **options: Any) -> ChatModel:
    """Build the `ChatModel` that `name` designates.

    - `"openai:<model>"`: `OpenAIChatModel(<model>)`; the key and endpoint come from
      `OPENAI_API_KEY` and `OPENAI_BASE_URL` (any OpenAI-compatible server).
    - `"anthropic:<model>"`: `AnthropicChatModel(<model>)`; `ANTHROPIC_API_KEY`,
      `ANTHROPIC_BASE_URL`.
    - `"google:<model>"` (or `"gemini:<model>"`): `GeminiChatModel(<model>)`; `GEMINI_API_KEY`
      (or `GOOGLE_API_KEY`), `GEMINI_BASE_URL`.
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
    factory = _PROVIDERS.get(provider.strip().lower()) if colon else None
    if factory is None:
        known = ", ".join(repr(prefix) for prefix in KNOWN_MODEL_PREFIXES)
        raise ValueError(f"unknown model {name!r}: expected one of {known}")
    if not model.strip():
        raise ValueError(f"model name missing after {provider + ':'!r} in {name!r}")
    return factory(model.strip(), options)
