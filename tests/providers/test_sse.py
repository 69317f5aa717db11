from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentforge_typed import ModelError
from agentforge_typed.providers._sse import (
    DEFAULT_MAX_LINE_LENGTH,
    ServerSentEvent,
    SSEDecoder,
    aiter_sse,
    iter_sse,
)


def decode(*chunks: bytes | str) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    return [event for chunk in chunks for event in decoder.feed(chunk)]


def test_data_event_and_default_type() -> None:
    assert decode(b'data: {"a": 1}\n\n') == [ServerSentEvent("message", '{"a": 1}')]


def test_event_id_and_retry_fields() -> None:
    stream = b"event: ping\nid: 7\nretry: 1500\ndata: x\n\n"
    assert decode(stream) == [ServerSentEvent("ping", "x", "7", 1500)]


def test_multi_line_data_joined_with_newline() -> None:
    assert decode(b"data: a\ndata:b\ndata:  c\ndata\n\n") == [ServerSentEvent(data="a\nb\n c\n")]


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_every_line_ending(eol: str) -> None:
    stream = f"event: e{eol}data: 1{eol}{eol}data: 2{eol}{eol}".encode()
    assert decode(stream) == [ServerSentEvent("e", "1"), ServerSentEvent(data="2")]


def test_crlf_split_between_chunks_is_one_line_end() -> None:
    assert decode(b"data: 1\r", b"\n\r", b"\ndata: 2\r\n\r\n") == [
        ServerSentEvent(data="1"),
        ServerSentEvent(data="2"),
    ]


def test_lone_cr_at_chunk_end_ends_the_line_at_once() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: 1\r") == []
    assert decoder.feed(b"\r") == [ServerSentEvent(data="1")]


def test_comments_and_keep_alives_are_ignored() -> None:
    stream = b": keep-alive\n\n:\ndata: x\n: between\n\n: OPENROUTER PROCESSING\n\n"
    assert decode(stream) == [ServerSentEvent(data="x")]


def test_block_without_data_dispatches_nothing_and_forgets_its_type() -> None:
    assert decode(b"event: lonely\n\ndata: y\n\n") == [ServerSentEvent(data="y")]


def test_id_persists_and_nul_ids_are_ignored() -> None:
    stream = b"id: 1\ndata: a\n\ndata: b\n\nid: x\x00y\ndata: c\n\nid\ndata: d\n\n"
    assert [(e.data, e.id) for e in decode(stream)] == [
        ("a", "1"),
        ("b", "1"),
        ("c", "1"),
        ("d", ""),
    ]


def test_invalid_retry_and_unknown_fields_are_ignored() -> None:
    assert decode(b"retry: 10s\nfoo: bar\ndata: z\n\n") == [ServerSentEvent(data="z")]


def test_multi_byte_character_split_across_chunks() -> None:
    raw = 'data: {"city":"杭州"}\n\n'.encode()
    cut = raw.index("杭".encode()) + 1
    assert decode(raw[:cut], raw[cut:]) == [ServerSentEvent(data='{"city":"杭州"}')]


def test_leading_bom_is_stripped_once() -> None:
    assert decode(b"\xef\xbb\xbf", b"data: 1\n\n") == [ServerSentEvent(data="1")]


def test_str_chunks() -> None:
    assert decode("data: é", "\n\n") == [ServerSentEvent(data="é")]


def test_unfinished_event_is_pending_not_dispatched() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: complete\n\ndata: cut") == [ServerSentEvent(data="complete")]
    assert decoder.pending
    decoder = SSEDecoder()
    decoder.feed(b"data: 1\n\n")
    assert not decoder.pending


def test_json_helper() -> None:
    assert ServerSentEvent(data='{"a": [1, 2]}').json() == {"a": [1, 2]}
    with pytest.raises(ValueError):
        ServerSentEvent(data="[DONE").json()


STREAM = (
    ": hello\r\n\r\n"
    'event: message_start\r\ndata: {"x": "héllo 😀"}\r\n\r\n'
    "id: 3\ndata: line1\ndata: line2\n\n"
    "retry: 20\rdata:\u2028 unicode separator stays data\r\r"
    "data: [DONE]\n\n"
).encode()


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=30))
def test_any_rechunking_gives_the_same_events(cuts: list[int]) -> None:
    points = sorted(set(cuts))
    chunks = [STREAM[a:b] for a, b in zip([0, *points], [*points, len(STREAM)], strict=True)]
    assert decode(*chunks) == decode(STREAM)
    assert [e.data for e in decode(STREAM)] == [
        '{"x": "héllo 😀"}',
        "line1\nline2",
        "\u2028 unicode separator stays data",
        "[DONE]",
    ]


def _chunked(data: bytes, size: int) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


class _AsyncChunks(httpx.AsyncByteStream):
    def __init__(self, data: bytes, size: int) -> None:
        self.data = data
        self.size = size

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in _chunked(self.data, self.size):
            yield chunk


def test_iter_sse_over_httpx_response() -> None:
    response = httpx.Response(200, content=_chunked(STREAM, 3))
    assert list(iter_sse(response)) == decode(STREAM)


async def test_aiter_sse_over_httpx_response() -> None:
    response = httpx.Response(200, stream=_AsyncChunks(STREAM, 5))
    assert [event async for event in aiter_sse(response)] == decode(STREAM)


def _feed_one_line(size: int, chunk: int = 16 * 1024) -> float:
    line = b"data: " + b"a" * size + b"\n\n"
    pieces = [line[start : start + chunk] for start in range(0, len(line), chunk)]
    best = float("inf")
    for _ in range(3):
        decoder = SSEDecoder()
        started = time.process_time()  # CPU time: what the machine's other work leaves out
        events = [event for piece in pieces for event in decoder.feed(piece)]
        best = min(best, time.process_time() - started)
        assert len(events) == 1 and len(events[0].data) == size
    return best


def test_decoding_is_linear_in_the_line_length() -> None:
    """A 16 MB line in 16 KiB reads costs about 4x a 4 MB one (re-scanning made it 16x);
    measured again when it fails, as a loaded machine loses the cache more often on the larger."""
    for _ in range(3):
        small, large = _feed_one_line(4 * 1024 * 1024), _feed_one_line(16 * 1024 * 1024)
        if large <= 6 * small + 0.05:
            return
    raise AssertionError((small, large))


@pytest.mark.parametrize("chunk", [1000, 7, 1])
def test_a_line_over_the_cap_is_a_model_error(chunk: int) -> None:
    decoder = SSEDecoder(max_line_length=100, source="Acme")
    stream = b"data: " + b"x" * 94 + b"\n\n"  # exactly 100 characters: fine
    assert [e for i in range(0, len(stream), chunk) for e in decoder.feed(stream[i : i + chunk])]
    over = b"data: " + b"x" * 95 + b"\n\n"
    with pytest.raises(
        ModelError, match="Acme sent a server-sent event line longer than the limit"
    ):
        for i in range(0, len(over), chunk):
            decoder.feed(over[i : i + chunk])


def test_an_event_whose_data_is_over_the_cap_is_a_model_error() -> None:
    decoder = SSEDecoder(max_line_length=100)
    with pytest.raises(ModelError, match="event data longer than the limit of 100"):
        decoder.feed(b"data: " + b"x" * 60 + b"\n" + b"data: " + b"x" * 60 + b"\n")


def test_the_default_cap_is_tens_of_megabytes() -> None:
    assert 10_000_000 <= DEFAULT_MAX_LINE_LENGTH <= 100_000_000


@pytest.mark.parametrize("tail", [b"data: last\n", b"data: last\r\n", b"data: last\r"])
def test_end_dispatches_a_complete_event_without_its_blank_line(tail: bytes) -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: first\n\nevent: final\n" + tail) == [ServerSentEvent(data="first")]
    assert decoder.end() == [ServerSentEvent("final", "last")]


def test_end_after_a_blank_line_or_a_comment_gives_nothing() -> None:
    decoder = SSEDecoder()
    decoder.feed(b"data: 1\n\n: bye\n")
    assert decoder.end() == []


@pytest.mark.parametrize(
    ("tail", "data"),
    [(b"data: [DONE]", "[DONE]"), (b'data:{"a": [1, "\xc3\xa9"]}', '{"a": [1, "é"]}')],
)
def test_end_reads_a_whole_last_data_line_without_its_line_break(tail: bytes, data: str) -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: first\n\nevent: final\n" + tail) == [ServerSentEvent(data="first")]
    assert decoder.end() == [ServerSentEvent("final", data)]


@pytest.mark.parametrize(
    "cut",
    [
        b'data: {"a": ',
        b"data: x\n\ndata",
        "data: 杭".encode()[:-1],
        b"data: [DON",
        b"data: 12",  # a cut "123" parses: only a whole object is taken as whole
        b'data: {"a": 1}\n\nevent: message_sto',
        b'data: {"a": 1}\n\nid: 7',
    ],
)
def test_end_inside_a_line_is_a_model_error(cut: bytes) -> None:
    decoder = SSEDecoder(source="Acme")
    decoder.feed(cut)
    with pytest.raises(ModelError, match="Acme stream ended inside a line"):
        decoder.end()
