"""The machine's headless Chromium (Debian's `chromium`, which `.ci/run` installs), driven by
Playwright, which downloads no browser here: the `browser` fixture the browser tests share. Under
CI (`CI` set) a missing Chromium or Playwright fails the test; elsewhere it skips, saying how to
install them."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

__all__ = ["CHROMIUM", "FLAGS", "browser"]

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the module's tests."""
    missing = [
        why
        for why, absent in (
            (
                "Chromium at /usr/bin/chromium (sudo apt-get install -y chromium)",
                not CHROMIUM.exists(),
            ),
            ("Playwright (pip install playwright)", importlib.util.find_spec("playwright") is None),
        )
        if absent
    ]
    if missing:
        message = f"the browser tests need {' and '.join(missing)}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        try:
            yield launched
        finally:
            launched.close()
