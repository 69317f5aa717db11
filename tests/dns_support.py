"""Name resolution for the tests of links that tools return: this machine may have no DNS, so the
few names a test needs answer from a table (`resolving`); every other name goes to the real
resolver (which still answers `localhost` from the hosts file)."""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping
from typing import Any

import pytest

__all__ = ["PUBLIC", "resolving"]

PUBLIC = "93.184.215.14"
"""A public address, as `ipaddress` sees it."""


def resolving(monkeypatch: pytest.MonkeyPatch, names: Mapping[str, str | float]) -> None:
    """Make `socket.getaddrinfo` answer each name of `names` with its address (one that contains
    `:` as IPv6), or, for a number, after sleeping that many seconds, with no address."""
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        answer = names.get(host) if isinstance(host, str) else None
        if answer is None:
            return real(host, port, *args, **kwargs)
        if isinstance(answer, float | int):
            time.sleep(answer)
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        if ":" in answer:
            return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", (answer, port or 0, 0, 0))]
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (answer, port or 0))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
