"""`get_model`: a `ChatModel` from a short name such as `"openai:gpt-4o-mini"`.

The name picks the provider; everything else (API keys, base URLs) comes from the environment,
read by the provider itself, so a name is safe to put in configuration files and command lines.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._exceptions import ModelError
from .._model import ChatModel

__all__ = ["COMPATIBLE", "KNOWN_MODEL_PREFIXES", "Compatible", "Endpoint", "endpoint", "get_model"]

_PROVIDERS: dict[str, tuple[str, str]] = {
    "openai": (".openai", "OpenAIChatModel"),
    "openai-responses": (".openai_responses", "OpenAIResponsesModel"),
    "anthropic": (".anthropic", "AnthropicChatModel"),
    "google": (".gemini", "GeminiChatModel"),
    "gemini": (".gemini", "GeminiChatModel"),
}
"""One entry per provider prefix: the module and class `"<prefix>:<model>"` builds, imported on
first use (so that listing the prefixes, as `--help` does, loads no provider and no httpx)."""


@dataclass(frozen=True)
class Compatible:
    """An OpenAI-compatible server as a `get_model` prefix: where it is, its key, its profile."""

    label: str
    """The server's name in messages, and its built-in profile's name."""
    base_url: str
    """The API root, unless `base_url_env` is set."""
    base_url_env: str
    """The environment variable that overrides `base_url`."""
    api_key_env: str | None = None
    """The environment variable the API key is read from; `None` for servers without keys."""
    key_required: bool = False
    """Whether the hosted endpoint refuses requests without a key (checked before sending)."""


def _hosted(label: str, base_url: str, key: str, base_url_env: str) -> Compatible:
    return Compatible(label, base_url, base_url_env, key, key_required=True)


def _local(label: str, base_url: str, base_url_env: str, key: str | None = None) -> Compatible:
    return Compatible(label, base_url, base_url_env, key)


COMPATIBLE: dict[str, Compatible] = {
    "deepseek": _hosted(
        "deepseek", "https://api.deepseek.com", "DEEPSEEK_API_KEY", "DEEPSEEK_BASE_URL"
    ),
    "dashscope": _hosted(
        "dashscope",
        "https://dashscope-intl.aliyuncs.com/compatible-mode/v1",
        "DASHSCOPE_API_KEY",
        "DASHSCOPE_BASE_URL",
    ),
    "moonshot": _hosted(
        "moonshot", "https://api.moonshot.ai/v1", "MOONSHOT_API_KEY", "MOONSHOT_BASE_URL"
    ),
    "minimax": _hosted(
        "minimax", "https://api.minimax.io/v1", "MINIMAX_API_KEY", "MINIMAX_BASE_URL"
    ),
    "groq": _hosted("groq", "https://api.groq.com/openai/v1", "GROQ_API_KEY", "GROQ_BASE_URL"),
    "together": _hosted(
        "together", "https://api.together.xyz/v1", "TOGETHER_API_KEY", "TOGETHER_BASE_URL"
    ),
    "mistral": _hosted(
        "mistral", "https://api.mistral.ai/v1", "MISTRAL_API_KEY", "MISTRAL_BASE_URL"
    ),
    "openrouter": _hosted(
        "openrouter", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", "OPENROUTER_BASE_URL"
    ),
    "gemini-openai": _hosted(
        "gemini-openai",
        "https://generativelanguage.googleapis.com/v1beta/openai",
        "GEMINI_API_KEY",
        "GEMINI_BASE_URL",
    ),
    "ollama": _local("ollama", "http://localhost:11434/v1", "OLLAMA_BASE_URL"),
    "vllm": _local("vllm", "http://localhost:8000/v1", "VLLM_BASE_URL", "VLLM_API_KEY"),
    "llamacpp": _local("llamacpp", "http://localhost:8080/v1", "LLAMACPP_BASE_URL"),
    "litellm": _local("litellm", "http://localhost:4000", "LITELLM_BASE_URL", "LITELLM_API_KEY"),
    "lmstudio": _local("lmstudio", "http://localhost:1234/v1", "LMSTUDIO_BASE_URL"),
}
"""OpenAI-compatible servers by prefix: `get_model("<prefix>:<model>")` builds an
`OpenAIChatModel` with the server's base URL, key and built-in profile."""
COMPATIBLE["qwen"] = COMPATIBLE["dashscope"]
_OPENAI = _hosted("openai", "https://api.openai.com/v1", "OPENAI_API_KEY", "OPENAI_BASE_URL")

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
    - `"google:<model>"` (or `"gemini:<model>"`): `GeminiChatModel(<model>)`; `GEMINI_API_KEY`
      (or `GOOGLE_API_KEY`), `GOOGLE_GEMINI_BASE_URL` (not `GEMINI_BASE_URL`, which is the
      `gemini-openai:` compatibility endpoint's).
    - `"fake"`: `FakeModel()`, offline and deterministic.
    - `"deepseek:<model>"`, `"ollama:<model>"`, `"groq:<model>"`, … (every key of
      `COMPATIBLE`): `OpenAIChatModel` with that server's base URL (overridden by its
      `<PREFIX>_BASE_URL` variable), API key (its `<PREFIX>_API_KEY` variable) and built-in
      `ModelProfile`; `profile=` and `base_url=` options override them.

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
    provider, colon, model = name.partition(":")
    if colon and provider.strip().lower() in COMPATIBLE:
        from .openai import OpenAIChatModel

        found = endpoint(name, options.pop("base_url", None), options.pop("api_key", None))
        options.setdefault("profile", found.profile)
        return OpenAIChatModel(
            found.model, base_url=found.base_url, api_key=found.api_key, **options
        )
    if name == "fake":
        from ._fake import FakeModel

        if options:
            raise TypeError(f"the fake model takes no options, got {', '.join(sorted(options))}")
        return FakeModel()
    entry = _PROVIDERS.get(provider.strip().lower()) if colon else None
    if entry is None:
        known = ", ".join(repr(prefix) for prefix in KNOWN_MODEL_PREFIXES)
        servers = ", ".join(sorted(COMPATIBLE))
        raise ValueError(
            f"unknown model {name!r}: expected one of {known}, or an OpenAI-compatible "
            f"server's '<server>:<model>' ({servers})"
        )
    if not model.strip():
        raise ValueError(f"model name missing after {provider + ':'!r} in {name!r}")
    module, class_name = entry
    factory: Callable[..., ChatModel] = getattr(
        importlib.import_module(module, __package__), class_name
    )
    return factory(model.strip(), **options)


@dataclass(frozen=True)
class Endpoint:
    """Where an OpenAI-compatible model is served: what `get_model` and `probe` connect to."""

    model: str
    base_url: str
    api_key: str | None
    profile: str | None
    """The built-in profile's name, `None` for a plain `openai:` endpoint."""


def endpoint(name: str, base_url: str | None = None, api_key: str | None = None) -> Endpoint:
    """The endpoint of `"<prefix>:<model>"` for an OpenAI-compatible prefix (`openai` included),
    from `base_url`/`api_key` when given, else the environment, else the server's defaults.

    Raises:
        ValueError: not an OpenAI-compatible prefix, or no model after it.
        ModelError: a hosted server's API key is missing.
    """
    provider, _, model = name.partition(":")
    provider = provider.strip().lower()
    model = model.strip()
    if provider == "openai":
        server = _OPENAI
    elif provider in COMPATIBLE:
        server = COMPATIBLE[provider]
    else:
        known = ", ".join(f"{prefix!r}" for prefix in ("openai", *COMPATIBLE))
        raise ValueError(f"{name!r} is not an OpenAI-compatible model: expected one of {known}")
    if not model:
        raise ValueError(f"model name missing after {provider + ':'!r} in {name!r}")
    if api_key is None and server.api_key_env is not None:
        api_key = os.environ.get(server.api_key_env)
    base_url = base_url or os.environ.get(server.base_url_env) or server.base_url
    if not api_key and server.key_required and base_url == server.base_url:
        raise ModelError(
            f"no {server.label} API key: set the {server.api_key_env} environment variable or "
            "pass api_key=..."
        )
    return Endpoint(
        model, base_url, api_key or None, None if provider == "openai" else server.label
    )
