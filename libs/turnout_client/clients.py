"""Ready-made `http_client=` values for the official `openai` and `anthropic` SDKs.

Owns: building an httpx (or httpx2) client whose transport is a
`GatewayTransport`. Which HTTP package: `httpx2` when it is installed (the
HTTP package of newer `openai` / `anthropic` releases; the Anthropic SDK
accepts nothing else), else `httpx`; pass `http=` to choose.
Must not import: `turnout` or any service package.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from turnout_client.chain import IdempotencyKeys, ModelChain
from turnout_client.transport import AsyncGatewayTransport, GatewayTransport, RoutingCallback


def http_package() -> ModuleType:
    """`httpx2` when importable, else `httpx`.

    Raises:
        ImportError: neither is installed.
    """
    try:
        return importlib.import_module("httpx2")
    except ImportError:
        return importlib.import_module("httpx")


def _keys(idempotency: bool | IdempotencyKeys) -> IdempotencyKeys | None:
    if isinstance(idempotency, IdempotencyKeys):
        return idempotency
    return IdempotencyKeys() if idempotency else None


def gateway_http_client(
    *,
    on_routing: RoutingCallback | Sequence[RoutingCallback] | None = None,
    model_chain: ModelChain | None = None,
    idempotency: bool | IdempotencyKeys = True,
    http: ModuleType | None = None,
    transport: Any = None,
    **client_args: Any,
) -> Any:
    """A sync `Client` for `openai.OpenAI(http_client=...)` / `anthropic.Anthropic(http_client=...)`.

    Args:
        on_routing: called with the `GatewayRouting` of every answer.
        model_chain: models to try after the requested one is exhausted
            (`{"gpt-5": ["small"]}`, or `["small"]` for every model).
        idempotency: add an Idempotency-Key per logical call (True), never
            (False), or with these `IdempotencyKeys` (e.g. a key factory).
        http: the HTTP package (`httpx` or `httpx2`); default `http_package()`.
        transport: the inner transport (default `http.HTTPTransport()`).
        **client_args: passed to `http.Client` (timeout, limits, ...).
    """
    pkg = http or http_package()
    wrapped = GatewayTransport(
        transport if transport is not None else pkg.HTTPTransport(),
        on_routing=on_routing,
        model_chain=model_chain,
        idempotency=_keys(idempotency),
    )
    return pkg.Client(transport=wrapped, **client_args)


def async_gateway_http_client(
    *,
    on_routing: RoutingCallback | Sequence[RoutingCallback] | None = None,
    model_chain: ModelChain | None = None,
    idempotency: bool | IdempotencyKeys = True,
    http: ModuleType | None = None,
    transport: Any = None,
    **client_args: Any,
) -> Any:
    """An `AsyncClient` for `openai.AsyncOpenAI` / `anthropic.AsyncAnthropic` (arguments of `gateway_http_client`)."""
    pkg = http or http_package()
    wrapped = AsyncGatewayTransport(
        transport if transport is not None else pkg.AsyncHTTPTransport(),
        on_routing=on_routing,
        model_chain=model_chain,
        idempotency=_keys(idempotency),
    )
    return pkg.AsyncClient(transport=wrapped, **client_args)
