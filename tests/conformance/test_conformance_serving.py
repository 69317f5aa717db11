"""The conformance suite for the server axis: every transport a `ToolServer` serves on (the CLI's
`mcp` command over it), checked for each guarantee that applies to what its clients send.

- bounded: a request at the documented cap (`DEFAULT_MAX_REQUEST_BYTES`) is served, one byte
  over is refused with an error, and the server stays up;
- deadline: a call ends within the server's call timeout, its body cancelled;
- secret: a deps factory's error naming a key, and a bearer token sent wrong, reach neither a
  client nor the server's log;
- malformed: a request that is not JSON, or not JSON-RPC, is answered with an error and the
  next one is served;
- scoped: two sessions at once on one server keep their own deps and their own log level;
- linear: a call's cost grows linearly with its arguments.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

import anyio
import mcp_types
import pytest
from conformance import LINEAR_FACTOR, SERVER, Surface, assert_registered
from mcp import Client

from agentforge_typed.serving import DEFAULT_CALL_TIMEOUT, DEFAULT_MAX_REQUEST_BYTES

TARGET = "tests/fixtures/serving_targets.py:tools"
SESSIONS = ("--deps", "new_session")
KEY = "sk-serving-canary-" + secrets.token_hex(12)

pytestmark = pytest.mark.slow


def test_covers_every_surface() -> None:
    assert_registered(SERVER)


def _call(request_id: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def _sized(size: int) -> bytes:
    """A `measure` call of exactly `size` bytes of JSON."""
    empty = json.dumps(_call(7, "measure", {"text": ""}), separators=(",", ":")).encode()
    text = "x" * (size - len(empty))
    body = json.dumps(_call(7, "measure", {"text": text}), separators=(",", ":")).encode()
    assert len(body) == size
    return body


@pytest.mark.parametrize("server", SERVER.each("bounded"))
def test_a_request_over_the_cap_is_refused_one_at_it_served(server: Surface[Any]) -> None:
    cap = DEFAULT_MAX_REQUEST_BYTES
    with server.build(TARGET, *SESSIONS) as endpoint:
        status, served = endpoint.exchange(_sized(cap))
        assert status == 200 and served is not None
        assert served["result"]["structuredContent"]["result"] > cap - 100
        status, refused = endpoint.exchange(_sized(cap + 1))
        if server.name == "http":
            assert status == 413
        else:
            assert refused is not None and refused["error"]["code"] == -32600
            assert "too large" in refused["error"]["message"]
        status, again = endpoint.exchange(json.dumps(_call(8, "total", {"items": [1, 2]})).encode())
        assert again is not None and again["result"]["structuredContent"] == {"result": 3}


@pytest.mark.parametrize("server", SERVER.each("deadline"))
async def test_every_call_ends_within_the_server_s_timeout(server: Surface[Any]) -> None:
    """A call's body runs at most `--call-timeout` seconds (300 by default, documented), then
    ends as a timeout error result; the session serves the next call."""
    assert DEFAULT_CALL_TIMEOUT == 300.0
    with server.build(TARGET, *SESSIONS, "--call-timeout", "1") as endpoint:
        with anyio.fail_after(60):
            async with endpoint.client() as client:
                started = time.monotonic()
                result = await client.call_tool("nap", {"seconds": 30})
                took = time.monotonic() - started
                after = await client.call_tool("total", {"items": [1]})
    assert result.is_error and _text(result) == "Tool `nap` timed out after 1 seconds."
    assert took < 1 + 5, took
    assert after.structured_content == {"result": 1}


@pytest.mark.parametrize("server", SERVER.each("secret"))
async def test_no_client_and_no_log_sees_a_secret(server: Surface[Any]) -> None:
    token = "tok-" + secrets.token_hex(16)
    args: tuple[str, ...] = ("--deps", "broken_deps")
    env = {"KEY": KEY}
    if server.name == "http":
        args += ("--token-env", "SERVING_TOKEN")
        env["SERVING_TOKEN"] = token
    with server.build(TARGET, *args, env=env) as endpoint:
        async with endpoint.client() as client:
            result = await client.call_tool("whoami", {})
        shown = result.model_dump_json()
        assert result.is_error and "making its deps failed (ConnectionError)" in shown
        if server.name == "http":
            import httpx

            async with httpx.AsyncClient() as http:
                wrong = await http.post(
                    endpoint.url,
                    json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                    headers={"authorization": f"Bearer {token[:-1]}x"},
                )
            assert wrong.status_code == 401
            shown += wrong.text + str(wrong.headers)
        logs = endpoint.logs()
    for text in (shown, logs):
        assert KEY not in text and KEY[-12:] not in text
        assert token not in text and token[-12:] not in text


@pytest.mark.parametrize("server", SERVER.each("malformed"))
def test_a_malformed_request_is_answered_and_serving_goes_on(server: Surface[Any]) -> None:
    with server.build(TARGET, *SESSIONS) as endpoint:
        # Not JSON-RPC: -32600 (invalid request) from our stdio transport, -32602 from the
        # SDK's HTTP transport, which validates the message as it would a request's params.
        not_json_rpc = {-32600, -32602}
        for body, codes in ((b"{not json", {-32700}), (b'{"id": 3, "hello": 1}', not_json_rpc)):
            status, answer = endpoint.exchange(body)
            assert answer is not None and answer["error"]["code"] in codes, (body, answer)
            assert status in (200, 400)
        status, fine = endpoint.exchange(json.dumps(_call(9, "total", {"items": [4]})).encode())
        assert fine is not None and fine["result"]["structuredContent"] == {"result": 4}


@pytest.mark.parametrize("server", SERVER.each("scoped"))
async def test_two_sessions_keep_their_own_deps_and_log_level(server: Surface[Any]) -> None:
    heard: dict[str, list[str]] = {"a": [], "b": []}

    def listener(name: str) -> Any:
        async def on_log(params: mcp_types.LoggingMessageNotificationParams) -> None:
            heard[name].append(str(params.data))

        return on_log

    with server.build(TARGET, *SESSIONS) as endpoint:
        with anyio.fail_after(60):
            async with (
                endpoint.client(mode="legacy", logging_callback=listener("a")) as a,
                endpoint.client(mode="legacy", logging_callback=listener("b")) as b,
            ):
                import warnings

                from mcp.shared.exceptions import MCPDeprecationWarning

                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    await a.set_logging_level("info")
                answers = [await client.call_tool("whoami", {}) for client in (a, b, a, b)]
                await a.call_tool("chatty", {})
                await b.call_tool("chatty", {})
    texts = [_text(answer) for answer in answers]
    session_a = texts[0].split(",")[0]
    session_b = texts[1].split(",")[0]
    assert session_a != session_b
    assert texts == [
        f"{session_a}, call 1",
        f"{session_b}, call 1",
        f"{session_a}, call 2",
        f"{session_b}, call 2",
    ]
    assert heard["a"] == [f"{session_a} says hi"] and heard["b"] == []


def _text(result: mcp_types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, mcp_types.TextContent)
    return block.text


@pytest.mark.parametrize("server", SERVER.each("linear"))
async def test_a_call_costs_linear_in_its_arguments(server: Surface[Any]) -> None:
    with server.build(TARGET, *SESSIONS) as endpoint:
        async with endpoint.client() as client:
            client_: Client = client

            async def total(size: int) -> None:
                result = await client_.call_tool("total", {"items": list(range(size))})
                assert not result.is_error

            timings: dict[int, float] = {}

            async def measure(size: int) -> float:
                best = float("inf")
                for _ in range(3):
                    started = time.perf_counter()
                    await total(size)
                    best = min(best, time.perf_counter() - started)
                return best

            await total(100)
            for size in (12_500, 100_000):
                timings[size] = await measure(size)
    small, large = max(timings[12_500], 0.01), timings[100_000]
    ratio = large / small
    # `assert_linear`'s rule (LINEAR_FACTOR), measured here around an async round trip.
    assert ratio <= LINEAR_FACTOR, (
        f"8x the items took {ratio:.1f}x the time ({small:.3f}s -> {large:.3f}s)"
    )
