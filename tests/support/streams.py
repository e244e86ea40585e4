"""Upstream stream bodies for relay tests: a body arriving in given reads, and a recorder of `finish`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx

from turnout.adapters.base import Usage
from turnout.core.types import FailureKind


class Reads(httpx.AsyncByteStream):
    """A response body arriving in the given reads; `cut` raises after them (a reset).

    With `gate`, each read after the first waits until the test releases it.
    """

    def __init__(self, *reads: bytes, cut: bool = False, gate: asyncio.Semaphore | None = None) -> None:
        self._reads, self._cut, self._gate = reads, cut, gate
        self.served = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for read in self._reads:
            if self._gate is not None and self.served:
                await self._gate.acquire()
            self.served += 1
            yield read
        if self._cut:
            raise httpx.ReadError("connection reset")


class Finishes:
    """Records each call of the relay's `finish`."""

    def __init__(self) -> None:
        self.calls: list[tuple[FailureKind, Usage, str]] = []

    async def __call__(self, kind: FailureKind, usage: Usage, error: str) -> None:
        self.calls.append((kind, usage, error))
