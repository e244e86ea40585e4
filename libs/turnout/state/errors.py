"""The one place where a store's Redis and socket errors become a Turnout error.

Owns: `StateUnavailable` (the shared state cannot be reached or answered
wrongly) and the two ways a store maps errors to it — `state_errors()`
around a block, `maps_state_errors` over every public method of a store
class. Callers outside `turnout.state` catch `StateUnavailable`, never
`redis.exceptions.RedisError`. The cause stays chained (`__cause__`).
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from redis.exceptions import RedisError

STATE_ERRORS: tuple[type[BaseException], ...] = (RedisError, OSError)
"""What a Redis client raises when the store is unreachable or fails: redis-py's
own errors, and socket errors (`ConnectionError`, builtin `TimeoutError`, both
`OSError`)."""

C = TypeVar("C", bound=type)


class StateUnavailable(Exception):
    """The shared state (Redis) is unreachable or failed; the cause is chained.

    Raised by every store in `turnout.state`; each caller applies its own
    outage policy (SPEC §5 "store outage": serve, refuse with 503
    `redis_unavailable`, or drop a best-effort write).
    """

    @property
    def kind(self) -> str:
        """The cause's class name (`ConnectionError`, `TimeoutError`, ...), for logs."""
        cause = self.__cause__
        return type(cause).__name__ if cause is not None else type(self).__name__


@contextmanager
def state_errors() -> Iterator[None]:
    """Map `STATE_ERRORS` raised in the block to `StateUnavailable` (cause chained).

    Raises:
        StateUnavailable: the block raised one of `STATE_ERRORS`.
    """
    try:
        yield
    except STATE_ERRORS as exc:
        raise StateUnavailable(str(exc) or type(exc).__name__) from exc


def _mapped(fn: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.isasyncgenfunction(fn):

        @functools.wraps(fn)
        async def agen(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            with state_errors():
                async for item in fn(*args, **kwargs):
                    yield item

        return agen
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def coro(*args: Any, **kwargs: Any) -> Any:
            with state_errors():
                return await fn(*args, **kwargs)

        return coro
    return fn


def maps_state_errors(cls: C) -> C:
    """Class decorator: every public coroutine and async generator method of
    `cls` raises `StateUnavailable` instead of `STATE_ERRORS`.

    Exceptions a caller passes in (a callback's own error) are not
    `STATE_ERRORS` and pass through unchanged.
    """
    for name, member in list(vars(cls).items()):
        if not name.startswith("_") and inspect.isfunction(member):
            setattr(cls, name, _mapped(member))
    return cls


def outage_kind(exc: BaseException) -> str:
    """The class name of what went wrong, for logs: a `StateUnavailable`'s cause, else `exc`'s own."""
    return exc.kind if isinstance(exc, StateUnavailable) else type(exc).__name__
