"""httpx transports for the official SDKs' `http_client=`: routing events, model chain, Idempotency-Key.

Owns: wrapping one inner transport (sync or async) so that every answer's
`x-turnout-*` headers become a `GatewayRouting` (given to the callbacks and
stored in `response.extensions["turnout.routing"]`), a POST gets an
Idempotency-Key reused across the SDK's own retries, and an exhausted chain
moves on to the caller's next model (rules: `turnout_client.chain`).
Works with `httpx` and with `httpx2` (the HTTP package of newer SDK
releases): requests are rebuilt with the request's own class. Streams are
covered: the gateway sends its headers with the first chunk, so the event is
known before the stream is read. Nothing is monkey-patched.
Must not import: `turnout` or any service package.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from turnout_client.chain import IDEMPOTENCY_HEADER, IdempotencyKeys, ModelChain, Step, plan_steps
from turnout_client.routing import EXHAUSTED_STATUSES, EXTENSION, GatewayRouting, error_code_of, parse_routing

log = logging.getLogger("turnout_client")

RoutingCallback = Callable[[GatewayRouting], None]


def _callbacks(on_routing: RoutingCallback | Sequence[RoutingCallback] | None) -> tuple[RoutingCallback, ...]:
    if on_routing is None:
        return ()
    return tuple(on_routing) if isinstance(on_routing, Sequence) else (on_routing,)


class _Calls:
    """What the sync and async transports share: steps, requests, events."""

    def __init__(
        self,
        on_routing: RoutingCallback | Sequence[RoutingCallback] | None,
        model_chain: ModelChain | None,
        idempotency: IdempotencyKeys | None,
    ) -> None:
        self.callbacks = _callbacks(on_routing)
        self.chain = model_chain
        self.keys = idempotency

    def steps(self, request: Any) -> list[Step]:
        content = bytes(request.content)
        key = request.headers.get(IDEMPOTENCY_HEADER)
        if key is None and self.keys is not None:
            key = self.keys.key_for(request.method, str(request.url), request.headers, content)
            if key is not None:
                request.headers[IDEMPOTENCY_HEADER] = key
        return plan_steps(content, key, self.chain)

    @staticmethod
    def request_for(request: Any, step: Step) -> Any:
        """The caller's request, or a copy asking for the step's model (same class, same extensions)."""
        if step.content is None:
            return request
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("content-length", IDEMPOTENCY_HEADER)}
        if step.key is not None:
            headers[IDEMPOTENCY_HEADER] = step.key
        return type(request)(
            request.method, request.url, headers=headers, content=step.content, extensions=request.extensions
        )

    @staticmethod
    def needs_body(response: Any, step: Step, steps: list[Step]) -> bool:
        """Whether the error body must be read to know if the chain may move on
        (an exhausted-looking status without `x-turnout-attempts`, and a next model)."""
        return (
            step is not steps[-1]
            and response.status_code in EXHAUSTED_STATUSES
            and "x-turnout-attempts" not in response.headers
        )

    def observe(self, response: Any, step: Step, *, read: bool = False) -> GatewayRouting:
        """Parse, store on the response and hand out the event; a failing callback is logged, never raised.

        Args:
            read: the body was read (its `error.code` goes into the event).
        """
        event = parse_routing(
            response.status_code,
            response.headers,
            requested_model=step.model,
            chain_index=step.index,
            error_code=error_code_of(response.content) if read else None,
        )
        response.extensions[EXTENSION] = event
        for callback in self.callbacks:
            try:
                callback(event)
            except Exception:
                log.exception("turnout routing callback %r failed", callback)
        return event


class GatewayTransport:
    """A sync transport around `inner` (see module doc).

    Args:
        inner: the transport that sends (e.g. `httpx.HTTPTransport()`).
        on_routing: called with each answer's `GatewayRouting` (one per HTTP
            answer: with a chain, one per model tried).
        model_chain: the client-side model chain, or None.
        idempotency: adds Idempotency-Key to POSTs (None: never).
    """

    def __init__(
        self,
        inner: Any,
        *,
        on_routing: RoutingCallback | Sequence[RoutingCallback] | None = None,
        model_chain: ModelChain | None = None,
        idempotency: IdempotencyKeys | None = None,
    ) -> None:
        self._inner = inner
        self._calls = _Calls(on_routing, model_chain, idempotency)

    def handle_request(self, request: Any) -> Any:
        """Send `request` (and, after an exhausted chain, the chain's next models); return one answer."""
        steps = self._calls.steps(request)
        original = None
        for step in steps:
            response = self._inner.handle_request(self._calls.request_for(request, step))
            read = self._calls.needs_body(response, step, steps)
            if read:
                response.read()
            event = self._calls.observe(response, step, read=read)
            if not event.chain_exhausted or step is steps[-1]:
                if original is not None and event.chain_exhausted:
                    response.close()
                    return original  # every model exhausted: the caller's own model's error
                if original is not None:
                    original.close()
                return response
            if original is None:
                response.read()  # kept, to answer with it if every model is exhausted
                original = response
            else:
                response.close()
        raise AssertionError("unreachable: the last step always returns")

    def close(self) -> None:
        self._inner.close()

    def __enter__(self) -> GatewayTransport:
        self._inner.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._inner.__exit__(*exc)


class AsyncGatewayTransport:
    """The async twin of `GatewayTransport`, for `AsyncOpenAI` / `AsyncAnthropic` (same arguments)."""

    def __init__(
        self,
        inner: Any,
        *,
        on_routing: RoutingCallback | Sequence[RoutingCallback] | None = None,
        model_chain: ModelChain | None = None,
        idempotency: IdempotencyKeys | None = None,
    ) -> None:
        self._inner = inner
        self._calls = _Calls(on_routing, model_chain, idempotency)

    async def handle_async_request(self, request: Any) -> Any:
        """See `GatewayTransport.handle_request`."""
        steps = self._calls.steps(request)
        original = None
        for step in steps:
            response = await self._inner.handle_async_request(self._calls.request_for(request, step))
            read = self._calls.needs_body(response, step, steps)
            if read:
                await response.aread()
            event = self._calls.observe(response, step, read=read)
            if not event.chain_exhausted or step is steps[-1]:
                if original is not None and event.chain_exhausted:
                    await response.aclose()
                    return original
                if original is not None:
                    await original.aclose()
                return response
            if original is None:
                await response.aread()
                original = response
            else:
                await response.aclose()
        raise AssertionError("unreachable: the last step always returns")

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> AsyncGatewayTransport:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._inner.__aexit__(*exc)
