"""Fixtures shared by the test modules: the PostgreSQL server (one for the session, started by
the first test that needs it), and stores of each registered kind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from postgres_server import PostgresServer, running

if TYPE_CHECKING:
    from conformance import Surface
    from store_support import Opener


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A real PostgreSQL server from the machine's binaries (see `postgres_server`)."""
    with running() as server:
        yield server


@pytest.fixture
def opener(
    tmp_path: Path, request: pytest.FixtureRequest, surface: Surface[Any]
) -> Iterator[Opener]:
    """Stores of the kind `surface` (a test's parameter) at a new place, closed at the end."""
    from store_support import Opener

    opened = Opener(surface, surface.build(tmp_path, request))
    try:
        yield opened
    finally:
        for store in opened.opened:
            store.close()
