"""Every httpx and aiohttp exception class maps to a transport failure kind.

The client raises httpx's exceptions (and `httpx_sse`'s, a subclass), and
under `httpx_aiohttp` their `__cause__` is aiohttp's; both trees are walked, so a class added by an
upgrade that `turnout.adapters.transport` does not know fails here.
"""

from __future__ import annotations

from collections.abc import Iterator

import aiohttp
import httpx
import pytest
from httpx_aiohttp.transport import AIOHTTP_EXC_MAP
from httpx_sse import SSEError

from turnout.adapters.transport import kind_of_type, transport_error_of
from turnout.core.types import TransportError

ROOTS: tuple[type[BaseException], ...] = (
    httpx.HTTPError,
    httpx.RequestError,
    httpx.TransportError,
    aiohttp.ClientError,
)
"""Matched on their wording: raised bare only by third-party code."""


def _tree(root: type[BaseException]) -> Iterator[type[BaseException]]:
    yield root
    for sub in root.__subclasses__():
        yield from _tree(sub)


def _classes() -> list[type[BaseException]]:
    found = {cls for root in (httpx.HTTPError, httpx.TransportError, aiohttp.ClientError) for cls in _tree(root)}
    found.update(AIOHTTP_EXC_MAP)
    found.update(AIOHTTP_EXC_MAP.values())
    return sorted(found - set(ROOTS), key=lambda c: f"{c.__module__}.{c.__qualname__}")


CLASSES = _classes()


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: f"{c.__module__.split('.')[0]}.{c.__qualname__}")
def test_exception_class_maps_to_a_transport_kind(cls: type[BaseException]) -> None:
    assert isinstance(kind_of_type(cls), TransportError), f"{cls} falls through unmapped"


def test_both_trees_are_walked() -> None:
    names = {c.__qualname__ for c in CLASSES}
    assert {"ReadTimeout", "RemoteProtocolError", "ServerDisconnectedError", "ClientConnectorDNSError"} <= names
    assert SSEError in CLASSES and len(CLASSES) > 40


@pytest.mark.parametrize("root", ROOTS, ids=lambda c: c.__qualname__)
def test_bare_root_is_read_by_its_wording_then_protocol(root: type[BaseException]) -> None:
    assert kind_of_type(root) is None
    assert transport_error_of(root("Connection refused")) is TransportError.CONNECT
    assert transport_error_of(root("???")) is TransportError.PROTOCOL


@pytest.mark.parametrize(
    ("cause", "wrapper", "kind"),
    [
        (aiohttp.ServerDisconnectedError(), httpx.ConnectTimeout, TransportError.RESET),
        (aiohttp.SocketTimeoutError(), httpx.ReadTimeout, TransportError.ATTEMPT_TIMEOUT),
        (aiohttp.ClientPayloadError("cut"), httpx.ReadError, TransportError.RESET),
        (aiohttp.InvalidUrlClientError("x"), httpx.UnsupportedProtocol, TransportError.CONNECT),
    ],
    ids=["disconnect_wrapped_as_connect_timeout", "socket_timeout", "payload", "invalid_url"],
)
def test_aiohttp_cause_wins_over_the_httpx_wrapper(
    cause: aiohttp.ClientError, wrapper: type[httpx.TransportError], kind: TransportError
) -> None:
    try:
        raise wrapper(str(cause)) from cause
    except httpx.TransportError as exc:
        assert transport_error_of(exc) is kind
