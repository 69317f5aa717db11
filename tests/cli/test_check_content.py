"""`agentforge-typed check` lists what happens to the images, documents, audio and files a typed
tool returns: Chat Completions sends them in a user message, a profile may take them nowhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentforge_typed.cli import main
from agentforge_typed.providers._profiles import PROFILES

TOOLS = '''
from agentforge_typed import AudioContent, ImageContent, ToolReturn, tool


@tool
def shot() -> ImageContent:
    """A screenshot."""
    return ImageContent(url="https://example.com/a.png")


@tool
def clip() -> list[str | AudioContent]:
    """A clip."""
    return ["Listen:", AudioContent(url="https://example.com/a.wav")]


@tool
def plain() -> str:
    """Text only."""
    return "text"


tools = [shot, clip, plain]
'''


@pytest.fixture
def target(tmp_path: Path) -> str:
    path = tmp_path / "content_tools.py"
    path.write_text(TOOLS, encoding="utf-8")
    return f"{path}:tools"


def check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    status = main(["check", *args])
    return status, [line.split(": ", 2)[2] for line in capsys.readouterr().out.splitlines()[:-1]]


def test_chat_completions_sends_tool_content_in_a_user_message(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    status, findings = check(capsys, target, "--dialect", "openai")
    assert status == 0
    assert findings == [
        f"{name}: returns {kind} parts: Chat Completions tool messages carry text only, so they "
        "are sent in a user message after the tool results (adaptation `tool_result_content`) "
        "[tool-result-content]"
        for name, kind in [("shot", "image"), ("clip", "audio")]
    ]


def test_a_profile_that_takes_no_such_parts(
    capsys: pytest.CaptureFixture[str], target: str, tmp_path: Path
) -> None:
    path = tmp_path / "no_audio.json"
    PROFILES["openai"].model_copy(
        update={
            "name": "no-audio",
            "tool_result_content": frozenset(),
            "user_content": frozenset({"image"}),
        }
    ).dump(path)
    status, findings = check(capsys, target, "--dialect", "anthropic", "--profile", str(path))
    assert status == 0
    assert findings == [
        "shot: profile 'no-audio': tool results carry no image parts; sent in a user message "
        "after the tool results [profile-content]",
        "clip: profile 'no-audio': takes no audio parts; left out when sent [profile-content]",
    ]
    strict = PROFILES["openai"].model_copy(
        update={
            "name": "strict",
            "tool_result_content": frozenset(),
            "policy": {"tool_result_content": "error"},
        }
    )
    strict.dump(path)
    status, findings = check(capsys, target, "--dialect", "anthropic", "--profile", str(path))
    assert status == 1
    assert findings == [
        f"{name}: profile 'strict': tool results carry no {kind} parts, and its policy refuses "
        "the request [profile-content]"
        for name, kind in [("shot", "image"), ("clip", "audio")]
    ]


ACCURATE = '''
from collections.abc import Sequence

from agentforge_typed import DocumentContent, ImageContent, ToolReturn, tool


@tool
def album() -> dict[str, ImageContent]:
    """Images by name: a dict is rendered as text, never sent as parts."""
    return {}


@tool
def pages() -> list[list[ImageContent]]:
    """A list of lists is text too."""
    return []


@tool
def scan() -> Sequence[str | DocumentContent] | None:
    """Text and documents, or nothing."""
    return None


@tool
def chart() -> ToolReturn[int]:
    """A value and parts of any kind."""
    return ToolReturn(1, content=[ImageContent(url="https://example.com/a.png")])


tools = [album, pages, scan, chart]
'''


def test_check_lists_only_the_part_kinds_a_tool_may_return(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "accurate_tools.py"
    path.write_text(ACCURATE, encoding="utf-8")
    status, findings = check(capsys, f"{path}:tools", "--dialect", "openai")
    assert status == 0
    sent = (
        ": Chat Completions tool messages carry text only, so they are sent in a user message "
        "after the tool results (adaptation `tool_result_content`) [tool-result-content]"
    )
    assert findings == [
        f"scan: returns document parts{sent}",
        f"chart: may return parts of any kind (a ToolReturn's content is not typed by kind){sent}",
    ]
    no_parts = PROFILES["openai"].model_copy(
        update={
            "name": "text-only",
            "tool_result_content": frozenset(),
            "user_content": frozenset(),
        }
    )
    no_parts.dump(tmp_path / "text_only.json")
    profile = str(tmp_path / "text_only.json")
    status, findings = check(
        capsys, f"{path}:tools", "--dialect", "anthropic", "--profile", profile
    )
    assert findings == [
        "scan: profile 'text-only': takes no document parts; left out when sent [profile-content]",
        "chart: profile 'text-only' (for the parts a ToolReturn may hold): takes no audio, "
        "document, file, image parts; left out when sent [profile-content]",
    ]
