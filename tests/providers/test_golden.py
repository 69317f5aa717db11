"""Every vendor provider against its golden cases (`tests/fixtures/golden/<vendor>/<case>/`): the
exact request each client path sends, the blocking parse, and the stream fed whole, byte by byte
and every 7 bytes (sync and async) and cut at random points. DEVELOPERS.md ("Golden files: the
vendor providers") says how to add a case; the folder's README.md what each case pins."""

from __future__ import annotations

import json
from typing import Any

import pytest
from golden_support import (
    CHUNKINGS,
    EXPECTED,
    INPUT,
    MODES,
    REQUEST,
    RESPONSE,
    STREAM,
    VENDORS,
    Case,
    answered,
    cases,
    cut,
    model,
    sent,
    stream_async,
    stream_sync,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentforge_typed import ChatModel

ALL = cases()
BLOCKING = cases(RESPONSE)
STREAMED = cases(STREAM)


def ids(found: list[Case]) -> list[str]:
    return [case.id for case in found]


def expected(case: Case) -> Any:
    assert case.has(EXPECTED), f"{case.id} has no {EXPECTED}: write it (tests/golden_update.py)"
    return case.json(EXPECTED)


def test_every_vendor_has_the_shared_cases() -> None:
    shared = {
        "text",
        "parallel_tool_calls",
        "tool_results",
        "thinking",
        "cached_usage",
        "finish_length",
        "stream_error",
        "refusal",
    }
    for vendor in VENDORS:
        names = {case.name for case in ALL if case.vendor == vendor}
        assert shared <= names, (vendor, sorted(shared - names))
    assert {case.vendor for case in ALL} == set(VENDORS)


@pytest.mark.parametrize("vendor", list(VENDORS))
def test_every_vendor_model_is_a_chat_model(vendor: str) -> None:
    assert isinstance(model(Case(vendor, "text"), answered({})), ChatModel)


@pytest.mark.parametrize("case", ALL, ids=ids(ALL))
def test_case_is_complete(case: Case) -> None:
    """Each case has its request and its expectations, and expects only what its bodies hold."""
    assert case.has(INPUT) and case.has(REQUEST), f"{case.id} needs {INPUT} and {REQUEST}"
    assert case.has(RESPONSE) or case.has(STREAM), f"{case.id} has no answer to parse"
    wanted = expected(case)
    answers = {"response": case.has(RESPONSE), "stream": case.has(STREAM)}
    assert set(wanted) == {key for key, there in answers.items() if there}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", ALL, ids=ids(ALL))
async def test_request_renders_to_the_exact_body(case: Case, mode: str) -> None:
    vendor = VENDORS[case.vendor]
    request = await sent(case, mode)
    stream = mode.endswith("stream")
    assert json.loads(request.content) == {
        **case.json(REQUEST),
        **(vendor.stream_fields if stream else {}),
    }
    assert (request.method, str(request.url)) == (
        "POST",
        vendor.stream_url if stream else vendor.url,
    )
    assert request.headers["content-type"] == "application/json"
    assert {name: request.headers.get(name) for name in vendor.headers} == vendor.headers


@pytest.mark.parametrize("case", BLOCKING, ids=ids(BLOCKING))
async def test_blocking_answer_parses_to_the_expected_response(case: Case) -> None:
    chat = model(case, answered(case.json(RESPONSE)))
    want = expected(case)["response"]
    assert chat.chat(case.request()).model_dump(mode="json") == want
    assert (await chat.achat(case.request())).model_dump(mode="json") == want


@pytest.mark.parametrize("chunking", list(CHUNKINGS))
@pytest.mark.parametrize("case", STREAMED, ids=ids(STREAMED))
async def test_stream_gives_the_expected_events_however_cut(case: Case, chunking: str) -> None:
    want = expected(case)
    pieces = cut(case.bytes(STREAM), CHUNKINGS[chunking])
    assert stream_sync(case, pieces, want.get("response")) == want["stream"]
    assert await stream_async(case, pieces, want.get("response")) == want["stream"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_cutting_of_any_stream_gives_the_expected_events(data: st.DataObject) -> None:
    case = data.draw(st.sampled_from(STREAMED), label="case")
    stream = case.bytes(STREAM)
    cuts = sorted(data.draw(st.sets(st.integers(1, len(stream) - 1), max_size=40), label="cuts"))
    pieces = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    want = expected(case)
    assert stream_sync(case, pieces, want.get("response")) == want["stream"]
