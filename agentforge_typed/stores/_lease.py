"""A run's hold on its conversation, kept alive: `hold` / `ahold` claim a conversation and renew
the claim in the background until it is released, so a run inside a tool call for longer than the
claim's ttl keeps it, and a run whose process died loses it within one ttl.

One renewer thread serves every lease of the process (a heap of due times), whatever store or
driver it belongs to: a blocking driver's thread busy in a tool, or an event loop blocked by one,
does not stop the renewals. A lease is renewed only when it has not been saved for a third of its
ttl; a run that saves at each round boundary is rarely renewed at all.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from .._exceptions import ConversationConflictError
from .._messages import ChatMessage
from ._base import Claim, Conversation, ConversationStore, conflict, shown

__all__ = ["Lease", "ahold", "hold"]

logger = logging.getLogger("agentforge_typed")

RETRY_SECONDS = 1.0
"""How soon a renewal that failed (the database unreachable) is tried again, at most."""


class Lease:
    """A claim on one conversation, renewed in the background until released: what a run
    holds while it works on the conversation. Made by `hold` and `ahold`; a context manager
    (`with` or `async with`) that releases it at the end.
    """

    def __init__(self, store: ConversationStore, claim: Claim, sent: float) -> None:
        self.store = store
        self._claim = claim
        self._lock = threading.Lock()
        self._renewed = sent
        """When (monotonic) the request that last extended the claim was sent."""
        self._retry_at = 0.0
        self._warned_at = -float("inf")
        self._lost = False
        self._released = False
        _RENEWER.add(self)

    def __repr__(self) -> str:
        state = "lost" if self._lost else "released" if self._released else "held"
        return f"<Lease {shown(self._claim.conversation_id)} {state}>"

    @property
    def claim(self) -> Claim:
        """The claim as it stands (after the last save or renewal)."""
        return self._claim

    @property
    def conversation(self) -> Conversation:
        """The conversation as claimed, or as this lease last saved it."""
        return self._claim.conversation

    @property
    def lost(self) -> bool:
        """Whether the claim is gone: released, taken by another run after it lapsed, or the
        conversation deleted."""
        return self._lost or self._released

    def check(self) -> None:
        """Raise `ConversationConflictError` unless the claim certainly still holds: call it
        before doing what must happen once (running a tool). It reads no database: the claim
        holds while it was renewed or saved less than its ttl ago."""
        if self.lost:
            raise conflict(self._claim.conversation_id)
        if time.monotonic() >= self._renewed + self._claim.ttl:
            raise ConversationConflictError(
                f"the claim on conversation {shown(self._claim.conversation_id)} lapsed: it "
                f"could not be renewed for {self._claim.ttl:g} s, and another run may hold it now",
                self._claim.conversation_id,
            )

    def _saved(self, claim: Claim, sent: float) -> Claim:
        with self._lock:
            self._claim, self._renewed = claim, max(self._renewed, sent)
        return claim

    def _failed(self, error: BaseException) -> None:
        if isinstance(error, ConversationConflictError):
            self._lost = True

    def save(
        self, messages: Sequence[ChatMessage], state: Mapping[str, Any] | None = None
    ) -> Claim:
        """Save the whole history (and `state`; `None` keeps it) under the claim, which the
        save renews. `ConversationConflictError` when the claim was lost (then the lease is)."""
        sent = time.monotonic()
        try:
            claim = self.store.save(self._claim, messages, state)
        except BaseException as error:
            self._failed(error)
            raise
        return self._saved(claim, sent)

    async def asave(
        self, messages: Sequence[ChatMessage], state: Mapping[str, Any] | None = None
    ) -> Claim:
        """`save`, as a coroutine."""
        sent = time.monotonic()
        try:
            claim = await self.store.asave(self._claim, messages, state)
        except BaseException as error:
            self._failed(error)
            raise
        return self._saved(claim, sent)

    def release(self) -> None:
        """Give the conversation up (once; nothing when the claim was lost)."""
        if self._end():
            self.store.release(self._claim)

    async def arelease(self) -> None:
        """`release`, as a coroutine."""
        if self._end():
            await self.store.arelease(self._claim)

    def _end(self) -> bool:
        with self._lock:
            if self._released:
                return False
            self._released = True
            return not self._lost

    def _renew_at(self) -> float:
        return max(self._renewed + self._claim.ttl / 3, self._retry_at)

    def _renew(self) -> None:
        """Renew the claim now (on the renewer's thread)."""
        sent = time.monotonic()
        claim = self._claim
        try:
            renewed = self.store.renew(claim)
        except ConversationConflictError:
            self._lost = True
            return
        except Exception as error:
            self._retry_at = sent + min(RETRY_SECONDS, claim.ttl / 10)
            if sent - self._warned_at >= claim.ttl:
                self._warned_at = sent
                logger.warning(
                    "could not renew the claim on conversation %s: %s",
                    shown(claim.conversation_id),
                    " ".join(str(error).split())[:300],
                )
            return
        with self._lock:
            if renewed.expires_at > self._claim.expires_at:
                self._claim = dataclasses.replace(self._claim, expires_at=renewed.expires_at)
            self._renewed = max(self._renewed, sent)

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc_info: object) -> None:
        try:
            self.release()
        except Exception:
            if kind is None:
                raise
            # The run's own error is what matters; the claim lapses on its own.
            logger.warning("could not release conversation %s", shown(self._claim.conversation_id))

    async def __aenter__(self) -> Lease:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, *exc_info: object) -> None:
        try:
            await self.arelease()
        except Exception:
            if kind is None:
                raise
            logger.warning("could not release conversation %s", shown(self._claim.conversation_id))


def hold(store: ConversationStore, conversation_id: str, *, ttl: float | None = None) -> Lease:
    """Claim the conversation in `store` and keep the claim alive until the `Lease` is
    released. `ConversationConflictError` at once while another run holds it."""
    sent = time.monotonic()
    return Lease(store, store.claim(conversation_id, ttl=ttl), sent)


async def ahold(
    store: ConversationStore, conversation_id: str, *, ttl: float | None = None
) -> Lease:
    """`hold`, as a coroutine."""
    sent = time.monotonic()
    return Lease(store, await store.aclaim(conversation_id, ttl=ttl), sent)


class _Renewer:
    """The thread that renews every live lease of the process when it falls due."""

    def __init__(self) -> None:
        self._ready = threading.Condition()
        self._due: list[tuple[float, int, Lease]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def add(self, lease: Lease) -> None:
        with self._ready:
            heapq.heappush(self._due, (lease._renew_at(), next(self._order), lease))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="agentforge-lease-renewer", daemon=True
                )
                self._thread.start()
            self._ready.notify()

    def _next(self) -> Lease:
        with self._ready:
            while True:
                if not self._due:
                    self._ready.wait()
                    continue
                wait = self._due[0][0] - time.monotonic()
                if wait > 0:
                    self._ready.wait(wait)
                    continue
                return heapq.heappop(self._due)[2]

    def _run(self) -> None:
        while True:
            lease = self._next()
            if lease.lost:
                continue
            try:
                if lease._renew_at() <= time.monotonic():
                    lease._renew()
            except Exception:  # never the thread every lease relies on
                logger.exception("renewing %r failed", lease)
            if not lease.lost:
                with self._ready:
                    heapq.heappush(self._due, (lease._renew_at(), next(self._order), lease))

    def _forked(self) -> None:
        # A child process has no renewer thread, and none of its parent's claims.
        self.__init__()  # type: ignore[misc]


_RENEWER = _Renewer()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_RENEWER._forked)
