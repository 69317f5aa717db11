"""`_decoding`: bodies inflated in steps, never past their cap, decoded as httpx decodes them."""

from __future__ import annotations

import asyncio
import gzip
import zlib

import httpx
import pytest

from agentforge_typed._transport._decoding import aiter_bounded, iter_bounded

TEXT = "héllo, wörld. " * 5000
REQUEST = httpx.Request("GET", "https://example.com/")


def _deflate_raw(data: bytes) -> bytes:
    compressor = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


ENCODED = {
    "gzip": gzip.compress(TEXT.encode()),
    "deflate": zlib.compress(TEXT.encode()),
    "identity": TEXT.encode(),
}


def _response(encoding: str, body: bytes, chunk: int = 1000) -> httpx.Response:
    pieces = [body[i : i + chunk] for i in range(0, len(body), chunk)]
    return httpx.Response(
        200,
        headers={"content-encoding": encoding},
        stream=httpx.ByteStream(b"".join(pieces)),
        request=REQUEST,
    )


@pytest.mark.parametrize("encoding", sorted(ENCODED))
def test_a_body_is_decoded_as_httpx_decodes_it(encoding: str) -> None:
    ours = b"".join(iter_bounded(_response(encoding, ENCODED[encoding]), 1 << 30))
    theirs = _response(encoding, ENCODED[encoding]).read()
    assert ours == theirs == TEXT.encode()


def test_an_encoding_httpx_leaves_alone_is_left_alone() -> None:
    body = gzip.compress(TEXT.encode())
    assert b"".join(iter_bounded(_response("x-gzip", body), 1 << 30)) == body


def test_raw_deflate_without_zlib_s_header_is_taken_as_httpx_takes_it() -> None:
    raw = _deflate_raw(TEXT.encode())
    assert b"".join(iter_bounded(_response("deflate", raw), 1 << 30)) == TEXT.encode()


@pytest.mark.parametrize("limit", [0, 1, 999, 4096])
def test_no_more_than_one_byte_past_the_limit_is_ever_inflated(limit: int) -> None:
    bomb = gzip.compress(b"\0" * (8 << 20))
    given = [len(piece) for piece in iter_bounded(_response("gzip", bomb, chunk=1 << 16), limit)]
    assert sum(given) == limit + 1


def test_async_reads_the_same() -> None:
    async def read(encoding: str, limit: int) -> bytes:
        response = _response(encoding, ENCODED[encoding])
        return b"".join([piece async for piece in aiter_bounded(response, limit)])

    assert asyncio.run(read("gzip", 1 << 30)) == TEXT.encode()
    assert asyncio.run(read("deflate", 9)) == TEXT.encode()[:10]


def test_a_body_that_is_not_what_it_says_is_a_decoding_error() -> None:
    with pytest.raises(httpx.DecodingError, match=r"incorrect header check|invalid"):
        b"".join(iter_bounded(_response("gzip", b"this is not gzip at all"), 1 << 20))
