"""Static-typing contract of `get_model` and the CLI entry point."""

from __future__ import annotations

from typing_extensions import assert_type

from agentforge_typed import ChatModel, ChatRequest, ChatResponse, UserMessage, get_model
from agentforge_typed.__main__ import main

model = get_model("openai:gpt-4o-mini", max_retries=3, temperature=0.2)
assert_type(model, ChatModel)
assert_type(model.chat(ChatRequest(messages=[UserMessage(content="hi")])), ChatResponse)
assert_type(main(["check", "examples/weather.py:tools"]), int)

get_model()  # type: ignore[call-arg]
get_model(model="fake")  # type: ignore[call-arg]
