"""The UI's endpoints to the protocols' own clients, none written here, under Node 22: the
official AG-UI client (`@ag-ui/client`'s `HttpAgent`, which checks every event's shape and
order) and the AI SDK's chat (`AbstractChat`, what `useChat` wraps: its UI message stream reader,
`addToolApprovalResponse` and `sendAutomaticallyWhen`), each through an approval round trip and
one more turn on the conversation it holds (`tests/js/agui_client.mjs`,
`tests/js/ui_stream_client.mjs`). The clients are installed when missing (`js_support`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import js_support
import pytest
import ui_support

from agentforge_typed.ui import create_app

pytestmark = pytest.mark.slow  # each test starts Node

node = js_support.node


@pytest.fixture(scope="module")
def url(node: Path) -> Iterator[str]:
    app = create_app(ui_support.service(), ui_support.model())
    with ui_support.served(app) as served:
        yield served


def report(node: Path, script: str, url: str, decision: str) -> Any:
    done = js_support.run_node(node, script, url, decision)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_the_official_ag_ui_client(node: Path, url: str, decision: str) -> None:
    ui_support.deleted.clear()
    seen = report(node, "agui_client.mjs", url, decision)
    assert seen["warnings"] == []  # the client strips and warns about anything off-schema
    first, resumed, third = seen["runs"]
    assert first["outcome"] == "interrupt" and first["errors"] == []
    [interrupt] = seen["interrupts"]
    assert interrupt["reason"] == "tool_call" and interrupt["toolCallId"] == "call_0"
    assert interrupt["metadata"]["arguments"] == {"path": "/tmp/x"}
    assert resumed["outcome"] == "success" and seen["pendingAfter"] == 0
    assert resumed["events"][:2] == ["RUN_STARTED", "TOOL_CALL_RESULT"]
    tool_message = resumed["newMessages"][0]
    expected = (
        "deleted /tmp/x"
        if decision == "approve"
        else "The user denied the call to `delete_file`: not today"
    )
    assert tool_message == {"role": "tool", "content": expected, "toolCalls": None}
    assert resumed["newMessages"][1]["content"] == f"Done: {expected}"
    assert ui_support.deleted == (["/tmp/x"] if decision == "approve" else [])
    # One more turn on the history the client kept: every message the server made is sealed.
    assert third["outcome"] == "success" and third["errors"] == []
    assert seen["messages"][-1]["content"] == "Done: value-of-abc"
    assert all(m["sealed"] for m in seen["messages"] if m["role"] != "user")


@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_the_ai_sdk_chat(node: Path, url: str, decision: str) -> None:
    ui_support.deleted.clear()
    seen = report(node, "ui_stream_client.mjs", url, decision)
    assert seen["errors"] == []  # no chunk off the SDK's schema, no stream error
    assert seen["statuses"] == ["ready", "ready", "ready"]
    # The approval went back in the same assistant message, which the answer continued.
    assert seen["askedId"] == seen["decidedId"]
    _first, continued, _third = seen["requests"]
    assert all(r["header"] == "v1" for r in seen["requests"])
    assert continued["messageId"] == seen["askedId"] and continued["count"] == 2
    _user, assistant, _, photo = seen["messages"]
    [call] = [p for p in assistant["parts"] if p["type"] == "tool-delete_file"]
    assert call["input"] == {"path": "/tmp/x"}
    if decision == "approve":
        assert call["state"] == "output-available" and call["output"] == "deleted /tmp/x"
        assert call["approval"]["approved"] is True
        assert ui_support.deleted == ["/tmp/x"]
    else:
        assert call["state"] == "output-denied"
        assert call["approval"] == {
            "id": call["approval"]["id"],
            "approved": False,
            "reason": "not today",
        }
        assert ui_support.deleted == []
    assert assistant["sealed"] and photo["sealed"]
    # A tool's image is a file part of the message.
    assert [p["mediaType"] for p in photo["parts"] if p["type"] == "file"] == ["image/png"]
