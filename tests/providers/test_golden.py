"""Every vendor provider against its recorded golden files (`tests/fixtures/golden/<vendor>/<case>/`):
the exact body a request renders to, the blocking parse, and the stream, fed whole, byte by byte
and every 7 bytes, sync and async. DEVELOPERS.md ("Golden files") says how to add a case."""

from __future__ import annotations

from typing import Any

import pytest
from golden_support import (
    CHUNKINGS,
    EXPECTED,
    INPUT,
    REQUEST,
    RESPONSE,
    STREAM,
    VENDORS,
    Case,
    answered,
    cases,
    model,
    sent,
    stream_async,
    stream_sync,
)

ALL = cases()
BLOCKING = cases(RESPONSE)
STREAMED = cases(STREAM)


def ids(found: list[Case]) -> list[str]:
    return [case.id for case in found]


def expected(case: Case) -> Any:
    assert case.has(EXPECTED), f"{case.id} has no {EXPECTED}: write it (tests/golden_update.py)"
    return case.json(EXPECTED)


def test_every_vendor_has_the_shared_cases() -> None:
    shared = {"text", "parallel_tool_calls", "cached_usage", "finish_length", "stream_error"}
    for vendor in VENDORS:
        names = {case.name for case in ALL if case.vendor == vendor}
        assert shared <= names, (vendor, sorted(shared - names))
    assert {case.vendor for case in ALL} == set(VENDORS)


@pytest.mark.parametrize("case", ALL, ids=ids(ALL))
def test_case_is_complete(case: Case) -> None:
    """Each case has its request and its expectations, and expects only what its bodies hold."""
    assert case.has(INPUT) and case.has(REQUEST), f"{case.id} needs {INPUT} and {REQUEST}"
    assert case.has(RESPONSE) or case.has(STREAM), f"{case.id} has no answer to parse"
    wanted = expected(case)
    answers = {"response": case.has(RESPONSE), "stream": case.has(STREAM)}
    assert set(wanted) == {key for key, there in answers.items() if there}


@pytest.mark.parametrize("stream", [False, True], ids=["blocking", "streamed"])
@pytest.mark.parametrize("case", ALL, ids=ids(ALL))
def test_request_renders_to_the_exact_body(case: Case, stream: bool) -> None:
    vendor = VENDORS[case.vendor]
    url, body = sent(case, stream=stream)
    extra = vendor.stream_fields if stream else {}
    assert body == {**case.json(REQUEST), **extra}
    assert url == (vendor.stream_url if stream else vendor.url)


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
    size = CHUNKINGS[chunking]
    assert stream_sync(case, size, want.get("response")) == want["stream"]
    assert await stream_async(case, size, want.get("response")) == want["stream"]
