"""Mistakes a newcomer makes, each caught with a message that says what to do."""

from __future__ import annotations

import socket

import pytest
from pydantic import ValidationError

from agentforge_typed import FakeModel, ModelError, ToolService, UserMessage, get_model, tool


@tool
def get_order(order_id: str) -> str:
    """Look an order up."""
    return order_id


def test_user_message_with_text_says_content_in_one_error() -> None:
    with pytest.raises(ValidationError) as info:
        UserMessage(text="hi")  # type: ignore[call-arg]
    assert info.value.error_count() == 1
    assert "UserMessage takes content=, not text=" in str(info.value)
    assert UserMessage(content="hi").text == "hi"


def test_a_bare_string_as_tools_says_to_pass_a_list() -> None:
    service = ToolService(groups={"orders": [get_order]})
    with pytest.raises(TypeError, match=r"not a string: pass \['group:orders'\]"):
        service.chat(FakeModel(), "hi", tools="group:orders")


def test_a_server_not_listening_is_named_in_the_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # free, and nothing listens on it once closed
    model = get_model("ollama:qwen3", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    with pytest.raises(ModelError) as info:
        ToolService().chat(model, "hi")
    assert f"request to http://127.0.0.1:{port} failed: ConnectError" in str(info.value)
