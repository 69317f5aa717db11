"""Served tools to the MCP clients of the JavaScript world, none written here: the official
TypeScript SDK's client, the MCP Inspector's CLI, and the official conformance suite's server
scenarios, all under Node 22.

The npm packages are installed when missing (`js_support`): without npm the module skips, saying
so; under CI (`CI` set) it fails instead. The HTTP tests share one server:
the CLI serving the reference tools (`tests/fixtures/mcp_reference_tools.py`).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import js_support
import pytest
from js_support import JS
from serving_support import REFERENCE, ROOT, cli_env, http_subprocess

pytestmark = pytest.mark.slow  # each test starts Node

node = js_support.node

INSPECTOR = JS / "node_modules" / "@modelcontextprotocol" / "inspector" / "clients" / "launcher"
CONFORMANCE = JS / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
REQUIRED = (
    "server-initialize",
    "server-sse-multiple-streams",
    "server-sse-polling",
    "ping",
    "logging-set-level",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-with-logging",
    "tools-call-error",
    "tools-call-with-progress",
    "tools-call-sampling",
    "tools-call-elicitation",
    "elicitation-sep1034-defaults",
    "elicitation-sep1330-enums",
    "json-schema-2020-12",
    "dns-rebinding-protection",
)
"""The scenarios that must pass: every `server-*`, `ping`, `logging-set-level`, `tools-*`,
`elicitation-*`, `json-schema-2020-12` and `dns-rebinding-protection` one of the suite."""


@pytest.fixture(scope="module")
def url(node: Path) -> Iterator[str]:
    """One HTTP server for the module: the CLI serving the reference tools."""
    with http_subprocess() as served:
        yield served


def run_node(node: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return js_support.run_node(node, *args, timeout=timeout, env=cli_env())


def _check_sdk_report(report: dict[str, Any], *, every_progress: bool = True) -> None:
    assert "add" in report["tools"] and "delete_note" in report["tools"]
    assert report["addInput"]["additionalProperties"] is False
    assert report["addOutput"]["type"] == "object"
    # The TypeScript client checks structured content against the output schema itself.
    assert report["add"]["structuredContent"] == {"total": 5, "parts": [2, 3]}
    assert report["add"]["content"] == [{"type": "text", "text": '{"total":5,"parts":[2,3]}'}]
    invalid = report["invalid"]
    assert invalid["isError"] is True
    assert invalid["content"][0]["text"].startswith("Invalid arguments for tool `add`:\n- $.a:")
    assert report["image"]["content"][0]["type"] == "image"
    assert report["image"]["content"][0]["mimeType"] == "image/png"
    assert report["approval"]["content"] == [{"type": "text", "text": "Deleted ts."}]
    assert report["approval"].get("isError") is False
    assert len(report["asked"]) == 1 and "`delete_note` needs your approval" in report["asked"][0]
    if every_progress:
        assert report["progress"] == [0, 50, 100]
    else:
        # The TypeScript client handles a notification a microtask after the message that
        # carried it, and a response at once: a progress notification read in the same chunk
        # as its call's response finds its handler gone (the client logs "unknown token").
        # The server sends all three first (tests/serving/test_serving_clients.py checks the order).
        assert report["progress"] in ([0, 50], [0, 50, 100])


def test_the_typescript_sdk_client_over_http(node: Path, url: str) -> None:
    done = run_node(node, "sdk_client.mjs", "http", url)
    assert done.returncode == 0, done.stderr
    _check_sdk_report(json.loads(done.stdout))


def test_the_typescript_sdk_client_over_stdio(node: Path) -> None:
    done = run_node(
        node,
        "sdk_client.mjs",
        "stdio",
        sys.executable,
        "-m",
        "agentforge_typed",
        "mcp",
        str(ROOT / REFERENCE.replace(":tools", "")) + ":tools",
    )
    assert done.returncode == 0, done.stderr
    _check_sdk_report(json.loads(done.stdout), every_progress=False)


def inspect(node: Path, *args: str) -> tuple[int, Any]:
    """The Inspector's CLI: its exit status and the JSON it printed."""
    done = run_node(node, str(INSPECTOR / "build" / "index.js"), "--cli", *args)
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else done.stderr


def test_the_inspector_cli_over_http(node: Path, url: str) -> None:
    status, listed = inspect(node, url, "--method", "tools/list", "--strict")
    # `--strict` exits 6 for any schema a client would find unportable.
    assert status == 0, listed
    assert "add" in [tool["name"] for tool in listed["tools"]]
    status, added = inspect(
        node, url, "--method", "tools/call", "--tool-name", "add", "--tool-arg", "a=2", "b=3"
    )
    assert status == 0 and added["structuredContent"] == {"total": 5, "parts": [2, 3]}
    status, invalid = inspect(
        node,
        url,
        "--method",
        "tools/call",
        "--tool-name",
        "unit_price",
        "--tool-arg",
        "kind=milk",
        "quantity=2",
    )
    assert status == 5 and invalid["isError"] is True  # 5: the tool answered isError
    assert '$.kind: Input should be "tea" or "coffee"' in invalid["content"][0]["text"]
    status, image = inspect(
        node, url, "--method", "tools/call", "--tool-name", "test_image_content"
    )
    assert status == 0 and image["content"][0]["type"] == "image"
    # The Inspector's CLI answers no questions: the call that needs approval does not run.
    status, refused = inspect(
        node,
        url,
        "--method",
        "tools/call",
        "--tool-name",
        "delete_note",
        "--tool-arg",
        "note=inspector",
    )
    assert status == 5 and "requires approval" in refused["content"][0]["text"]


def test_the_inspector_cli_serves_the_examples_over_stdio(node: Path) -> None:
    served = [sys.executable, "-m", "agentforge_typed", "mcp", "examples/weather.py:tools"]
    # The Inspector starts the server with the environment it is given, in `--cwd`.
    command = [*served, "--cwd", str(ROOT), "-e", f"PYTHONPATH={ROOT}"]
    status, listed = inspect(node, *command, "--method", "tools/list", "--strict")
    assert status == 0, listed
    assert [tool["name"] for tool in listed["tools"]] == ["get_weather", "get_forecast"]
    status, weather = inspect(
        node,
        *command,
        "--method",
        "tools/call",
        "--tool-name",
        "get_weather",
        "--tool-arg",
        "city=Paris",
    )
    assert status == 0 and weather["structuredContent"]["city"] == "Paris"


def test_the_official_conformance_suite_s_server_scenarios(
    node: Path, url: str, tmp_path: Path
) -> None:
    done = run_node(
        node,
        str(CONFORMANCE),
        "server",
        "--url",
        url,
        "--suite",
        "all",
        "--expected-failures",
        str(JS / "expected-failures.yaml"),
        "-o",
        str(tmp_path),
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    results: dict[str, list[dict[str, Any]]] = {}
    for checks in tmp_path.glob("server-*/checks.json"):
        # `server-<scenario>-<timestamp, its colons and dots as dashes>`
        scenario = re.sub(r"-\d{4}-\d\d-\d\dT[\d-]+Z$", "", checks.parent.name)
        results[scenario.removeprefix("server-")] = json.loads(checks.read_text())
    for scenario in REQUIRED:
        assert scenario in results, f"{scenario} did not run: {sorted(results)}"
        failed = [check for check in results[scenario] if check["status"] == "FAILURE"]
        assert not failed, f"{scenario}: {failed}"
