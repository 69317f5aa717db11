"""`store_from_url`: the one place a store URL is read (the CLI's `--store`, a program's
configuration)."""

from __future__ import annotations

from typing import Any

from ._base import ConversationStore

__all__ = ["store_from_url"]

URL_FORMS = "sqlite:///path.db (sqlite:////absolute/path.db), postgresql://user@host/db, or memory:"


def store_from_url(url: str, **options: Any) -> ConversationStore:
    """The store a URL names, built with `options` (`claim_ttl=`, `max_record_bytes=`, ...):

    - `sqlite:///conversations.db`: `SQLiteStore` on the file (relative to the working
      directory; `sqlite:////var/lib/app/conversations.db` for an absolute path);
    - `postgresql://user:password@host:5432/db` (or `postgres://`): `PostgresStore`;
    - `memory:`: `MemoryStore`.

    Raises `ValueError` for any other URL (naming its scheme only: a URL may hold a password).
    """
    if not isinstance(url, str):
        raise TypeError(f"a store URL is a str, not {type(url).__name__}")
    scheme, colon, rest = url.partition(":")
    scheme = scheme.lower()
    if scheme == "memory" and colon and rest in ("", "//"):
        from ._memory import MemoryStore

        return MemoryStore(**options)
    if scheme == "sqlite" and rest.startswith("///") and len(rest) > 3:
        from ._sqlite import SQLiteStore

        return SQLiteStore(rest[3:], **options)
    if scheme in ("postgresql", "postgres") and rest.startswith("//"):
        from ._postgres import PostgresStore

        return PostgresStore(url, **options)
    named = f"a {scheme!r} URL" if colon and scheme.isalnum() else "that"
    raise ValueError(f"{named} is not a store URL: use {URL_FORMS}")
