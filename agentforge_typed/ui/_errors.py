"""What the endpoints refuse before a run starts: an HTTP status and a message for the client."""

from __future__ import annotations

__all__ = ["InputError"]


class InputError(Exception):
    """A request refused before anything runs: `status` is the HTTP status it is answered with
    (400 malformed, 401 no token, 409 not what the thread waits for, 413 too large, 415 not
    JSON, 422 not the protocol's shape, 503 too many runs), `message` what the client reads."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
