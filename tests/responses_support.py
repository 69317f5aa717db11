"""Shared helpers for the OpenAI Responses tests: recorded-shape fixtures and a scripted server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from openai_support import API_KEY, Server
from retry_waits import waiting

from agentforge_typed.providers.openai_responses import OpenAIResponsesModel

FIXTURES = Path(__file__).parent / "fixtures" / "golden" / "openai_responses"


def fixture_bytes(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def fixture_json(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def rechunk(data: bytes, cuts: list[int]) -> list[bytes]:
    """`data` cut at the given offsets (taken modulo its length)."""
    points = sorted({cut % (len(data) + 1) for cut in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


class ResponsesServer(Server):
    """`Server`, answering an `OpenAIResponsesModel`."""

    def model(self, name: str = "gpt-5-mini", **kwargs: Any) -> OpenAIResponsesModel:  # type: ignore[override]
        transport = httpx.MockTransport(self.handler)
        kwargs.setdefault("api_key", API_KEY)
        model = OpenAIResponsesModel(
            name,
            http_client=httpx.Client(transport=transport),
            async_http_client=httpx.AsyncClient(transport=transport),
            **kwargs,
        )
        return waiting(model, self.sleep, self.asleep)
