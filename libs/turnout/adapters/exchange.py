"""One HTTP exchange with an upstream, whatever API family it speaks.

Owns: the two `Upstream`s the router calls — `call_json` (a complete
answer) and `open_stream` (an SSE answer up to its commit point) — and
therefore every upstream call: the family is looked up by `CallSpec.kind`,
`CallSpec.operation` and `CallSpec.api` (`family_for`), a `vertex` call given its access token
(`google_tokens.authorized`), its request sent within the attempt's time limit, and every
way the exchange can fail (timeout, transport error) turned into an
`AttemptResult`; a stream is held until the commit point
(`turnout.adapters.commit`) and closed otherwise. The families only build
requests and read answers. With a trace active (the attempt's span is the
current one), the request carries its W3C trace context (`traceparent`), so an
upstream that traces (a self-hosted model server) continues the trace.
Must not import: services, FastAPI, arq.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import msgspec
from opentelemetry import propagate, trace

from turnout.adapters.base import ApiFamily, AttemptResult, CallSpec, NativeFrames, describe_error
from turnout.adapters.commit import until_commit
from turnout.adapters.direct import send_json
from turnout.adapters.families import family_for
from turnout.adapters.google_tokens import authorized
from turnout.adapters.transport import direct_transport, transport_error_of
from turnout.core.types import Outcome, TransportError


def _family(spec: CallSpec) -> ApiFamily:
    """The family of `spec`'s kind and operation (the router asks `family_for` before every
    attempt and never dispatches a pair it does not have).

    Raises:
        LookupError: the kind's API has no such operation (a router fault).
    """
    family = family_for(spec.kind, spec.operation, spec.api)
    if family is None:
        raise LookupError(f"`{spec.kind}` providers have no {spec.operation} call")
    return family


def _build(
    family: ApiFamily, client: httpx.AsyncClient, spec: CallSpec, *, stream: bool
) -> httpx.Request | AttemptResult:
    """The family's request (with the trace context when a trace is active: module doc), or the
    failed attempt when `spec.base_url` cannot be sent at all.

    A tenant's stored base URL that httpx cannot parse (bad IPv6 brackets,
    control characters, an invalid IDNA label) is a failed attempt
    (TransportError.CONNECT, its exception class named), never an exception
    out of the adapter: the job is answered like any other failure.
    """
    try:
        request = family.build_request(client, spec, stream=stream)
    except (httpx.InvalidURL, ValueError) as exc:  # IDNAError is a UnicodeError, a ValueError
        return AttemptResult(
            outcome=Outcome(
                transport=TransportError.CONNECT,
                message=f"the provider's URL cannot be used ({type(exc).__name__})",
            )
        )
    if isinstance(request, httpx.Request) and trace.get_current_span().get_span_context().is_valid:
        # a trace is active: it continues upstream
        propagate.inject(request.headers)
    return request


async def call_json(client: httpx.AsyncClient, spec: CallSpec) -> AttemptResult:
    """One non-streaming attempt (an `Upstream`): send, read the whole answer.

    Args:
        client: the process's shared client (or the SSRF-guarded one).
        spec: the call; `spec.kind` and `spec.operation` choose the family (`family_for`),
            `spec.timeout_s` bounds the whole attempt (connect + send + wait
            + read), seconds.

    Returns:
        An `AttemptResult` whose success body is an OpenAI `chat.completion`
        (a native call's: the provider's own body, `shape` its surface);
        never raises for upstream trouble (every exception is mapped by
        `transport_error_of`). Cancellation propagates.
    """
    family = _family(spec)
    ready = await authorized(spec)  # a `vertex` call's access token, or its credential failure
    if isinstance(ready, AttemptResult):
        return ready
    request = _build(family, client, ready, stream=False)
    if isinstance(request, AttemptResult):
        return request
    transport = direct_transport(client)
    try:
        async with asyncio.timeout(spec.timeout_s):
            if transport is not None:  # the shared client, uninstrumented: httpx's layers skipped
                status, headers, content = await send_json(client, transport, request)
            else:
                response = await client.send(request)
                status, headers, content = response.status_code, response.headers, response.content
    except TimeoutError:
        return AttemptResult(
            outcome=Outcome(
                transport=TransportError.ATTEMPT_TIMEOUT,
                message=f"no complete answer within {spec.timeout_s:.3f} s",
            )
        )
    except Exception as exc:  # noqa: BLE001 - every transport failure becomes an Outcome
        kind = transport_error_of(exc)
        return AttemptResult(outcome=Outcome(transport=kind, message=describe_error(exc, kind)))
    return family.read_outcome(status, headers, content, time.time(), native=spec.native is not None)


async def open_stream(client: httpx.AsyncClient, spec: CallSpec) -> AttemptResult:
    """One streaming attempt (an `Upstream`) up to its commit point (SPEC §8).

    Args:
        client: the process's shared client (or the SSRF-guarded one).
        spec: the call, its body with `stream: true`; `spec.kind` chooses the
            family. `spec.timeout_s` bounds the attempt until the first
            content, seconds; `spec.ttft_timeout_s` the first token (None:
            `timeout_s` only), and hitting it is a FIRST_TOKEN_TIMEOUT
            (fallback-now).

    Returns:
        An `AttemptResult` whose `stream` (OpenAI-shaped `UpstreamStream`,
        holding the open response; a native call's also gathers the provider's
        own events, `UpstreamStream.native`) is set when committed; otherwise the
        response is closed. A non-SSE answer is read by the family: an error
        status keeps its outcome, a success body is malformed (PROTOCOL).
        Never raises for upstream trouble; cancellation propagates (the
        response is closed).
    """
    family = _family(spec)
    ready = await authorized(spec)  # a `vertex` call's access token, or its credential failure
    if isinstance(ready, AttemptResult):
        return ready
    request = _build(family, client, ready, stream=True)
    if isinstance(request, AttemptResult):
        return request
    return await _send_stream(
        client,
        request,
        family,
        timeout_s=spec.timeout_s,
        ttft_timeout_s=spec.ttft_timeout_s,
        native=family.native_frames() if spec.native is not None else None,
    )


async def _send_stream(
    client: httpx.AsyncClient,
    request: httpx.Request,
    family: ApiFamily,
    *,
    timeout_s: float,
    ttft_timeout_s: float | None,
    native: NativeFrames | None,
) -> AttemptResult:
    limit_s = timeout_s if ttft_timeout_s is None else min(timeout_s, ttft_timeout_s)
    ttft_bound = ttft_timeout_s is not None and ttft_timeout_s <= timeout_s
    response: httpx.Response | None = None
    committed = False
    try:
        async with asyncio.timeout(limit_s):
            response = await client.send(request, stream=True)
            if response.status_code != 200 or family.stream_media_type not in response.headers.get("content-type", ""):
                content = await response.aread()
                result = family.read_outcome(response.status_code, response.headers, content, time.time())
                if result.body is not None:
                    return AttemptResult(
                        outcome=Outcome(
                            status=response.status_code,
                            transport=TransportError.PROTOCOL,
                            message=f"upstream answered a stream request without {family.stream_media_type}",
                        )
                    )
                return result
            events = family.stream_events(response, native)
            result = await until_commit(response, events, stream_end=family.stream_end)
            committed = result.stream is not None
            if committed and native is not None:
                result.stream.native = native
                return msgspec.structs.replace(result, shape=family.native_surface)
            return result
    except TimeoutError:
        kind = TransportError.FIRST_TOKEN_TIMEOUT if ttft_bound else TransportError.ATTEMPT_TIMEOUT
        return AttemptResult(outcome=Outcome(transport=kind, message=f"no first content within {limit_s:.3f} s"))
    except Exception as exc:  # noqa: BLE001 - every transport failure becomes an Outcome
        kind = transport_error_of(exc)
        return AttemptResult(outcome=Outcome(transport=kind, message=describe_error(exc, kind)))
    finally:
        if response is not None and not committed:
            await asyncio.shield(response.aclose())
