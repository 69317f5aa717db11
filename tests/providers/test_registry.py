"""`get_model`: provider prefixes, keys and base URLs from the environment, and the error."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from agentforge_typed import (
    AnthropicChatModel,
    ChatRequest,
    FakeModel,
    ModelError,
    UserMessage,
    get_model,
)
from agentforge_typed.providers.openai import OpenAIChatModel

OPENAI_BODY = {
    "id": "chatcmpl-9xYz",
    "object": "chat.completion",
    "created": 1718000000,
    "model": "gpt-4o-mini-2024-07-18",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Hello!", "refusal": None},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11},
    "system_fingerprint": "fp_0ba0d124f1",
}

ANTHROPIC_BODY = {
    "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [{"type": "text", "text": "Hello!"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 9, "output_tokens": 2},
}


class Recorder:
    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return httpx.Response(200, json=self.body)


REQUEST = ChatRequest(messages=[UserMessage(content="Hi")])


def test_fake() -> None:
    model = get_model("fake")
    assert isinstance(model, FakeModel)
    assert model.chat(REQUEST).ai_message.text == "Echo: Hi"


def test_fake_takes_no_options() -> None:
    with pytest.raises(TypeError, match="takes no options, got temperature"):
        get_model("fake", temperature=0.5)


def test_openai_key_and_base_url_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-env")
    monkeypatch.setenv("OPENAI_BASE_URL", "https://llm.example.com/v1")
    recorder = Recorder(OPENAI_BODY)
    with httpx.Client(transport=httpx.MockTransport(recorder)) as client:
        model = get_model("openai:gpt-4o-mini", http_client=client)
        assert isinstance(model, OpenAIChatModel)
        assert model.model == "gpt-4o-mini"
        response = model.chat(REQUEST)
    assert response.ai_message.text == "Hello!"
    [request] = recorder.requests
    assert str(request.url) == "https://llm.example.com/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test-env"
    assert json.loads(request.content) == {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "Hi"}],
    }


def test_anthropic_key_and_base_url_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://gateway.example.com")
    recorder = Recorder(ANTHROPIC_BODY)
    with httpx.Client(transport=httpx.MockTransport(recorder)) as client:
        model = get_model("anthropic:claude-sonnet-4-5", http_client=client)
        assert isinstance(model, AnthropicChatModel)
        assert model.model == "claude-sonnet-4-5"
        response = model.chat(REQUEST)
    assert response.ai_message.text == "Hello!"
    [request] = recorder.requests
    assert str(request.url) == "https://gateway.example.com/v1/messages"
    assert request.headers["x-api-key"] == "sk-ant-test-env"
    assert json.loads(request.content) == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": "Hi"}],
    }


def test_only_the_first_colon_separates_the_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    model = get_model("openai:ft:gpt-4o-mini-2024-07-18:acme::9abc")
    assert isinstance(model, OpenAIChatModel)
    assert model.model == "ft:gpt-4o-mini-2024-07-18:acme::9abc"


def test_options_reach_the_constructor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    model = get_model("anthropic:claude-haiku-4-5", temperature=0.2, max_tokens=256)
    assert isinstance(model, AnthropicChatModel)
    assert model.defaults.temperature == 0.2
    assert model.defaults.max_tokens == 256


def test_missing_key_says_how_to_fix_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ModelError, match="ANTHROPIC_API_KEY"):
        get_model("anthropic:claude-sonnet-4-5")


@pytest.mark.parametrize("name", ["gpt-4o", "palm:text-bison", "Fake", "", "openai"])
def test_unknown_names_list_the_known_prefixes(name: str) -> None:
    with pytest.raises(ValueError) as info:
        get_model(name)
    assert str(info.value) == (
        f"unknown model {name!r}: expected one of 'openai:<model>', "
        "'openai-responses:<model>', 'anthropic:<model>', 'google:<model>', 'gemini:<model>', "
        "'fake', or an OpenAI-compatible server's '<server>:<model>' (dashscope, deepseek, "
        "gemini-openai, groq, litellm, llamacpp, lmstudio, minimax, mistral, moonshot, ollama, "
        "openrouter, qwen, together, vllm)"
    )


@pytest.mark.parametrize("name", ["openai:", "anthropic:  "])
def test_a_prefix_without_a_model_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="model name missing after"):
        get_model(name)
