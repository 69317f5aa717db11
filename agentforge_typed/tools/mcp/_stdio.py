"""A stdio server's stderr: passed on as it comes, its end kept to say why a server did not start.

A server whose command is missing, or that exits before it initializes, fails deep inside the
SDK's task groups (a `FileNotFoundError`, or a closed connection, wrapped in exception groups).
What a person needs is the command and what the server wrote before it ended: `start_error`
says both in one `ConnectionError`.
"""

from __future__ import annotations

import codecs
import os
import threading
from typing import TextIO

from ._session import describe

__all__ = ["StderrTail"]

KEPT_BYTES = 4096
"""The end of the server's stderr that is kept (what grows without end is not)."""
SHOWN_LINES = 10
"""At most this many of its last lines are shown."""
_DRAIN_SECONDS = 1.0
"""How long `start_error` waits for the rest of the stderr of a process that has ended."""


class StderrTail:
    """Passes a stdio server's stderr on to `errlog` and keeps its last `KEPT_BYTES`."""

    def __init__(self, errlog: TextIO) -> None:
        self._errlog = errlog
        self._kept = b""
        self._lock = threading.Lock()
        self._pump: threading.Thread | None = None

    def open(self) -> TextIO:
        """The write end of a new pipe, for the process's stderr: close it once the process has
        started (the process holds its own copy, and its end ends the pipe)."""
        read, write = os.pipe()
        self._kept = b""
        self._pump = threading.Thread(
            target=self._forward, args=(read,), name="agentforge-mcp-stderr", daemon=True
        )
        self._pump.start()
        return os.fdopen(write, "w")

    def start_error(self, label: str, error: BaseException) -> ConnectionError:
        """One error for a server that did not start: its command line, why, and the end of
        its stderr."""
        if self._pump is not None:
            self._pump.join(_DRAIN_SECONDS)  # the process has ended or been stopped by now
        with self._lock:
            kept = self._kept
        lines = kept.decode("utf-8", "replace").splitlines()[-SHOWN_LINES:]
        shown = [_printable(line) for line in lines if line.strip()]
        if shown:
            end = "; the end of its stderr:\n  " + "\n  ".join(shown)
        else:  # (a command that could not be run wrote nothing)
            end = "" if isinstance(error, OSError) else "; it wrote nothing to stderr"
        start_error = ConnectionError(
            f"MCP server {label!r} did not start ({describe(error)}){end}"
        )
        start_error.__suppress_context__ = True  # the SDK's exception groups say no more
        return start_error

    def _forward(self, read: int) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        with os.fdopen(read, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                with self._lock:
                    self._kept = (self._kept + chunk)[-KEPT_BYTES:]
                try:
                    self._errlog.write(decoder.decode(chunk))
                    self._errlog.flush()
                except (OSError, ValueError):  # an errlog closed meanwhile: keep draining
                    pass


def _printable(line: str) -> str:
    """`line` with control characters escaped: a server's output is not to move the cursor."""
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in line)
