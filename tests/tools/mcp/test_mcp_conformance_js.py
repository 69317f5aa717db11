"""The MCP client against the official conformance suite's client scenarios (Node 22, from
`tests/js`, installed when missing as tests/serving/test_serving_js.py says): the suite starts its
mock servers, authorization servers among them, and runs tests/fixtures/mcp_conformance_client.py
against each — an `MCPServer` over streamable HTTP authorizing through the MCP SDK's OAuth
providers (`auth=`), its tools called through a `ToolService` run. Every scenario must pass but
those `tests/js/expected-failures.yaml` lists under `client:` (which must still fail), under both
kinds of revision the client has (`revision="newest"`, which probes `server/discover` first, and
`"handshake"`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

import js_support
from js_support import JS
from js_support import node as node  # the fixture
from serving_support import ROOT, cli_env
from test_serving_js import CONFORMANCE, run_node

pytestmark = pytest.mark.slow  # each scenario starts Node and a Python client

CLIENT = ROOT / "tests" / "fixtures" / "mcp_conformance_client.py"
SCENARIOS = (
    "initialize",
    "tools_call",
    "elicitation-sep1034-client-defaults",
    "sse-retry",
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/client-credentials-jwt",
    "auth/client-credentials-basic",
    "auth/cross-app-access-complete-flow",
)
"""Every client scenario of the suite (`conformance list --client`)."""


def test_the_scenarios_are_the_suite_s(node: Path) -> None:
    listed = run_node(node, str(CONFORMANCE), "list", "--client")
    assert listed.returncode == 0, listed.stderr
    names = [line.split()[1] for line in listed.stdout.splitlines() if line.startswith("  - ")]
    assert sorted(names) == sorted(SCENARIOS)


def expected_failures() -> set[str]:
    """The scenarios `expected-failures.yaml` lists under `client:`."""
    _, _, client = (JS / "expected-failures.yaml").read_text().partition("\nclient:\n")
    return {line.removeprefix("  - ") for line in client.splitlines() if line.startswith("  - ")}


@pytest.mark.parametrize("revision", ["newest", "handshake"])
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_official_conformance_suite_s_client_scenario(
    node: Path, scenario: str, revision: str, tmp_path: Path
) -> None:
    done = js_support.run_node(
        node,
        str(CONFORMANCE),
        "client",
        "--command",
        f"{sys.executable} {CLIENT}",  # split on spaces: neither path may hold one
        "--scenario",
        scenario,
        "--timeout",
        "90000",
        "--expected-failures",
        str(JS / "expected-failures.yaml"),
        "-o",
        str(tmp_path),
        timeout=180,
        env={**cli_env(), "AGENTFORGE_MCP_REVISION": revision},
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    (checks,) = tmp_path.glob(f"{scenario}-*/checks.json")
    statuses = {check["id"]: check["status"] for check in json.loads(checks.read_text())}
    assert statuses
    failed = sorted(name for name, status in statuses.items() if status == "FAILURE")
    assert bool(failed) == (scenario in expected_failures()), statuses
