"""A provider is a wire object composed with the shared HTTP model: nothing else to copy."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, get_type_hints

import httpx
import pytest
from typing_extensions import Unpack

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequest,
    ChatRequestParameters,
    ChatResponse,
    ModelError,
    OpenAIChatModel,
    OpenAIResponsesModel,
    ResponseComplete,
    StreamEvent,
    TextDelta,
    UserMessage,
)
from agentforge_typed.providers._base import HttpChatModel, HttpModelOptions, ParameterDefaults
from agentforge_typed.providers._http import WireBase
from agentforge_typed.providers._sse import ServerSentEvent
from agentforge_typed.providers.openai import OpenAIOptions

REQUEST = ChatRequest(messages=[UserMessage(content="hi")])


class _EchoParser:
    def __init__(self) -> None:
        self.done = False
        self._text: list[str] = []

    def take(self, event: ServerSentEvent) -> list[StreamEvent]:
        if event.data == "[END]":
            self.done = True
            return []
        self._text.append(event.data)
        return [TextDelta(text=event.data)]

    def end(self) -> list[StreamEvent]:
        text = "".join(self._text)
        return [ResponseComplete(response=ChatResponse(ai_message=AiMessage(text=text)))]


def _payload(
    messages: Sequence[ChatMessage], parameters: ChatRequestParameters, *, stream: bool
) -> dict[str, Any]:
    return {"model": parameters.model, "temperature": parameters.temperature, "stream": stream}


def _parse(body: Any) -> ChatResponse:
    return ChatResponse(ai_message=AiMessage(text=body["said"]))


@dataclass(frozen=True)
class EchoWire(WireBase):
    """A whole vendor in a dozen lines: what adding a provider takes."""

    provider: ClassVar[str] = "Echo"
    path: ClassVar[str] = "v1/say"
    default_base_url: ClassVar[str] = "https://api.echo.test/"
    api_key_env: ClassVar[str] = "ECHO_API_KEY"
    base_url_env: ClassVar[str] = "ECHO_BASE_URL"
    build_payload = staticmethod(_payload)
    parse_response = staticmethod(_parse)
    stream_parser = _EchoParser

    def headers(self, api_key: str | None) -> dict[str, str]:
        return {"x-echo-key": api_key} if api_key else {}


class EchoChatModel(HttpChatModel):
    def __init__(self, model: str, **options: Unpack[HttpModelOptions]) -> None:
        super().__init__(EchoWire(), model, options)


def _handler(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content)
    if body["stream"]:
        return httpx.Response(
            200,
            headers={"content-type": "text/event-stream"},
            content=b"data: he\n\ndata: llo\n\ndata: [END]\n\n",
        )
    return httpx.Response(200, json={"said": f"{body['model']} at {body['temperature']}"})


def _echo(**options: Any) -> tuple[EchoChatModel, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return _handler(request)

    transport = httpx.MockTransport(handler)
    model = EchoChatModel(
        "echo-1",
        api_key="ek-1",
        http_client=httpx.Client(transport=transport),
        async_http_client=httpx.AsyncClient(transport=transport),
        **options,
    )
    return model, seen


async def test_a_wire_object_is_a_whole_provider_on_every_path() -> None:
    model, seen = _echo(temperature=0.5)
    assert model.chat(REQUEST).ai_message.text == "echo-1 at 0.5"
    assert (await model.achat(REQUEST)).ai_message.text == "echo-1 at 0.5"
    streamed = list(model.stream(REQUEST))
    assert [e.text for e in streamed if isinstance(e, TextDelta)] == ["he", "llo"]
    final = [e async for e in model.astream(REQUEST)][-1]
    assert isinstance(final, ResponseComplete) and final.response.ai_message.text == "hello"
    assert {str(r.url) for r in seen} == {"https://api.echo.test/v1/say"}
    assert all(r.headers["x-echo-key"] == "ek-1" for r in seen)
    assert repr(model) == "EchoChatModel('echo-1', base_url='https://api.echo.test')"


def test_the_shared_rules_come_from_the_wire(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ECHO_API_KEY", raising=False)
    monkeypatch.delenv("ECHO_BASE_URL", raising=False)
    with pytest.raises(ModelError, match=r"no Echo API key: pass api_key=\.\.\. to EchoChatModel"):
        EchoChatModel("echo-1")
    monkeypatch.setenv("ECHO_BASE_URL", "http://localhost:9000")
    assert EchoChatModel("echo-1").base_url == "http://localhost:9000"
    with pytest.raises(TypeError, match="temprature"):
        EchoChatModel("echo-1", temprature=1.0)  # type: ignore[call-arg]


def test_parameter_defaults_are_the_request_parameters() -> None:
    """The typed keyword list cannot drift from `ChatRequestParameters`."""
    own = {"model", "max_tokens"}
    assert set(ParameterDefaults.__annotations__) == set(ChatRequestParameters.model_fields) - own


@pytest.mark.parametrize("cls", [OpenAIChatModel, OpenAIResponsesModel])
def test_openai_models_take_the_account_options_from_one_list(cls: Any) -> None:
    """`organization` and `project` (and the prompt-cache options) are declared once, for both
    OpenAI APIs, and the account options still reach the headers; a misspelt one is refused, not
    sent as a request parameter."""
    assert get_type_hints(cls.__init__)["options"] == Unpack[OpenAIOptions]
    own = set(OpenAIOptions.__annotations__) - set(HttpModelOptions.__annotations__)
    assert own == {"organization", "project", "prompt_cache_key", "prompt_cache_retention"}
    seen: list[httpx.Request] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(400, json={"error": {"message": "bad request", "type": "x"}})

    client = httpx.Client(transport=httpx.MockTransport(refuse))
    model = cls("m", api_key="sk-1", http_client=client, organization="org-1", project="proj-1")
    with pytest.raises(ModelError, match="bad request"):
        model.chat(REQUEST)
    assert (seen[0].headers["openai-organization"], seen[0].headers["openai-project"]) == (
        "org-1",
        "proj-1",
    )
    assert "organization" not in json.loads(seen[0].content)
    with pytest.raises(TypeError, match="organisation"):
        cls("m", api_key="sk-1", organisation="org-1")
