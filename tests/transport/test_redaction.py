"""`_redaction`: the one redactor, what it finds secret, and text redacted as it streams."""

from __future__ import annotations

import base64
import itertools
import logging
import random
import time

import pytest
from conformance import assert_linear
from hypothesis import given, settings
from hypothesis import strategies as st

from agentforge_typed._transport._redaction import (
    FRAGMENT,
    REDACTED,
    Redactor,
    header_secrets,
    looks_random,
    url_secrets,
)

KEY = "sk-canary-0123456789abcdefghijKLMNOPQR"


def _leaks(text: str, secret: str = KEY) -> list[str]:
    """Every run of `FRAGMENT` characters of `secret` that `text` holds."""
    runs = (secret[i : i + FRAGMENT] for i in range(len(secret) - FRAGMENT + 1))
    return [run for run in runs if run in text]


def test_a_secret_and_every_run_of_it_are_replaced() -> None:
    redactor = Redactor([KEY])
    assert redactor.replace(f"bad key {KEY}!") == f"bad key {REDACTED}!"
    assert redactor.replace(f"key {KEY[:20]}...") == f"key {REDACTED}..."
    assert redactor.replace("nothing here") == "nothing here"
    assert redactor.redact({KEY: [KEY, 1, None]}) == {REDACTED: [REDACTED, 1, None]}
    assert not Redactor([None, ""]) and Redactor([None, ""]).replace(KEY) == KEY


def test_scrub_replaces_before_it_cuts() -> None:
    text = "x" * 1995 + KEY + "y" * 5000
    scrubbed = Redactor([KEY]).scrub(text)
    assert not _leaks(scrubbed)
    assert scrubbed.startswith("x" * 1995 + "[reda")


def test_clean_redacts_an_exception_and_drops_a_chain_that_holds_the_secret() -> None:
    try:
        try:
            raise ValueError(f"parsing {KEY}")
        except ValueError as cause:
            raise RuntimeError(f"failed for {KEY}") from cause
    except RuntimeError as caught:
        error = caught
    cleaned = Redactor([KEY]).clean(error)
    assert cleaned is error
    assert str(error) == f"failed for {REDACTED}"
    assert error.__cause__ is None and error.__suppress_context__
    plain = RuntimeError("nothing secret")
    assert Redactor([KEY]).clean(plain) is plain and str(plain) == "nothing secret"


@pytest.mark.parametrize(
    ("name", "value", "found"),
    [
        ("Authorization", "Bearer tok", ["Bearer tok", "tok"]),
        ("X-Api-Key", "k1", ["k1"]),
        ("x-goog-api-key", "k1", ["k1"]),
        ("apiKey", "k1", ["k1"]),
        ("Cookie", "session=abc", ["session=abc"]),
        ("X-Request-Id", "r-1", []),
        ("Author", "ada", []),
        ("Keyword", "shoes", []),
        ("X-Custom", "a1b2c3d4e5f6a1b2c3d4e5f6", ["a1b2c3d4e5f6a1b2c3d4e5f6"]),
        ("Accept", "application/json", []),
    ],
)
def test_header_secrets_by_name_or_by_look(name: str, value: str, found: list[str]) -> None:
    assert header_secrets({name: value}) == found


def test_a_basic_authorization_gives_its_password_too() -> None:
    credentials = base64.b64encode(b"ada:s3cret-pass").decode()
    found = header_secrets({"Authorization": f"Basic {credentials}"})
    assert "s3cret-pass" in found and f"Basic {credentials}" in found


@pytest.mark.parametrize(
    ("url", "found"),
    [
        ("https://h/x?api_key=k1&page=2", ["k1"]),
        ("https://h/x?access_token=a%2Fb", ["a%2Fb", "a/b"]),
        ("https://u:pw@h/x", ["pw"]),
        ("https://h/hooks/T0/abcDEF0123456789abcDEF0123", ["abcDEF0123456789abcDEF0123"]),
        ("https://h/v1/items/{item_id}?fields=name", []),
        ("https://h/models/gpt-4o-mini-2024-07-18/chat", []),
    ],
)
def test_url_secrets(url: str, found: list[str]) -> None:
    assert list(dict.fromkeys(url_secrets(url))) == found


@pytest.mark.parametrize(
    ("text", "random_looking"),
    [
        ("0123456789abcdef0123456789abcdef", True),
        ("550e8400-e29b-41d4-a716-446655440000", True),
        ("a-long-slug-of-plain-words-only", False),
        ("short1", False),
        ("12345678901234567890123456", False),
    ],
)
def test_looks_random(text: str, random_looking: bool) -> None:
    assert looks_random(text) is random_looking


@settings(max_examples=200, deadline=None)
@given(
    before=st.text(max_size=30),
    after=st.text(max_size=30),
    cuts=st.lists(st.integers(min_value=0, max_value=120), max_size=12),
)
def test_a_secret_streamed_in_any_pieces_never_shows(
    before: str, after: str, cuts: list[int]
) -> None:
    """However the text is cut into pieces, what the stream shows is what `replace` makes of the
    whole: a key sent a few characters at a time is replaced whole."""
    text = before + KEY + after + KEY[:20]
    redactor = Redactor([KEY])
    stream = redactor.stream()
    bounds = sorted({0, len(text), *(c for c in cuts if c < len(text))})
    shown = "".join(stream.feed(text[a:b]) for a, b in itertools.pairwise(bounds))
    shown += stream.end()
    assert shown == redactor.replace(text)
    assert not _leaks(shown)


def test_a_stream_without_secrets_holds_nothing_back() -> None:
    stream = Redactor().stream()
    assert stream.feed("abc") == "abc"
    assert stream.end() == ""


def test_a_stream_is_linear_in_its_pieces() -> None:
    rng = random.Random(7)
    pieces = ["".join(rng.choice("abcdef -") for _ in range(4)) for _ in range(80_000)]
    redactor = Redactor([KEY, "another-secret-0123456789"])

    def run(size: int) -> None:
        stream = redactor.stream()
        for piece in pieces[:size]:
            stream.feed(piece)
        stream.end()

    assert_linear(run, 10_000, what="a redacted stream", clock=time.process_time)


def test_watched_logs_are_redacted_until_the_redactor_is_forgotten(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    redactor = Redactor(["tok-only-here-0123456789"])
    with redactor.watching_logs():
        logging.getLogger("httpx").info("GET /x?token=%s", "tok-only-here-0123456789")
    logging.getLogger("httpx").info("GET /y?token=%s", "tok-only-here-0123456789")
    first, second = (record.getMessage() for record in caplog.records)
    assert first == f"GET /x?token={REDACTED}"
    assert second == "GET /y?token=tok-only-here-0123456789"


def test_a_redactor_watched_for_good_stays_watched_after_a_block(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A tool's own redactor serves its calls as it is when a call adds no secret: the call's
    block must not end the watch its owner started."""
    caplog.set_level(logging.INFO)
    redactor = Redactor(["tok-kept-for-good-0123456789"])
    redactor.watch_logs()
    with redactor.watching_logs():
        pass
    logging.getLogger("httpx").info("GET /z?token=%s", "tok-kept-for-good-0123456789")
    assert caplog.records[-1].getMessage() == f"GET /z?token={REDACTED}"


def test_a_lone_string_is_refused_as_secrets() -> None:
    """`secrets="abc"` would redact every `a`, `b` and `c` of every result."""
    from agentforge_typed import HttpTool, MCPServer

    with pytest.raises(TypeError, match="secrets must be a collection of strings, not a str"):
        HttpTool("t", url="https://api.example.com/", secrets="abc")
    with pytest.raises(TypeError, match="not a str"):
        MCPServer.http("https://mcp.example.com/", secrets="abc")
