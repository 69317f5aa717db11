"""Static-typing contract of model profiles."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from typing_extensions import assert_type

from agentforge_typed import ChatModel, OpenAIChatModel, get_model
from agentforge_typed.providers import ModelProfile, UnsupportedFeatureError

profile = ModelProfile(name="local", tool_choice={"auto"}, policy={"tool_choice": "error"})
assert_type(profile.policy_for("tool_choice"), Literal["adapt", "error"])
assert_type(ModelProfile.load("profile.json"), ModelProfile)

OpenAIChatModel("m", base_url="http://localhost:11434/v1", profile=profile)
OpenAIChatModel("m", base_url="http://localhost:11434/v1", profile="ollama")
OpenAIChatModel("m", base_url="http://localhost:11434/v1", profile=Path("profile.json"))
assert_type(OpenAIChatModel("m", profile="ollama").profile, ModelProfile | None)
assert_type(get_model("ollama:qwen3", profile="vllm"), ChatModel)
assert_type(UnsupportedFeatureError("tools", "no tools").feature, str)

OpenAIChatModel("m", profile=3)  # type: ignore[arg-type]
profile.policy_for("colour")  # type: ignore[arg-type]
