"""Run a `ToolService` under each of its four drivers and get the `ToolChatResult` back (the
conformance suite's `DRIVER` axis, for the tests outside it)."""

from __future__ import annotations

from conformance import drive

__all__ = ["DRIVERS", "drive"]

DRIVERS = ["chat", "achat", "stream", "astream"]
