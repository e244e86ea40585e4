"""One HTTP exchange with an upstream, whatever API family it speaks.

Owns: sending a built request within the attempt's time limit and turning
every way it can fail (timeout, transport error) into an `AttemptResult`;
for streams, holding the response until the family's commit reader says the
first content arrived, and closing it otherwise. The API families
(`openai_*`, `anthropic_*`) only build requests and read responses.
Must not import: services, FastAPI, arq.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import httpx

from turnout.adapters.openai_chat import AttemptResult, describe_error
from turnout.adapters.transport import transport_error_of
from turnout.core.types import Outcome, TransportError

ReadOutcome = Callable[[int, httpx.Headers, bytes, float], AttemptResult]
"""Reads a complete response: (status, headers, body, now epoch s) -> result."""

ReadUntilCommit = Callable[[httpx.Response], Awaitable[AttemptResult]]
"""Reads an SSE response up to its first content (result.stream set when committed)."""


def post_request(client: httpx.AsyncClient, url: str, *, content: bytes,
                 headers: dict[str, str]) -> httpx.Request | AttemptResult:
    """The POST to send, or the failed attempt when `url` cannot be sent at all.

    A tenant's stored base URL that httpx cannot parse (bad IPv6 brackets,
    control characters, an invalid IDNA label) is a failed attempt
    (TransportError.CONNECT, its exception class named), never an exception
    out of the adapter: the job is answered like any other failure.
    """
    try:
        return client.build_request("POST", url, content=content, headers=headers)
    except (httpx.InvalidURL, ValueError) as exc:  # IDNAError is a UnicodeError, a ValueError
        return AttemptResult(outcome=Outcome(
            transport=TransportError.CONNECT, message=f"the provider's URL cannot be used ({type(exc).__name__})",
        ))


async def send_json(client: httpx.AsyncClient, request: httpx.Request, *, timeout_s: float,
                    read: ReadOutcome) -> AttemptResult:
    """Send `request` and read the whole answer within `timeout_s` seconds.

    Never raises for upstream trouble; cancellation propagates.
    """
    try:
        async with asyncio.timeout(timeout_s):
            response = await client.send(request)
    except TimeoutError:
        return AttemptResult(outcome=Outcome(
            transport=TransportError.ATTEMPT_TIMEOUT, message=f"no complete answer within {timeout_s:.3f} s",
        ))
    except Exception as exc:  # noqa: BLE001 - every transport failure becomes an Outcome
        kind = transport_error_of(exc)
        return AttemptResult(outcome=Outcome(transport=kind, message=describe_error(exc, kind)))
    return read(response.status_code, response.headers, response.content, time.time())


async def send_stream(
    client: httpx.AsyncClient,
    request: httpx.Request,
    *,
    timeout_s: float,
    ttft_timeout_s: float | None,
    read: ReadOutcome,
    until_commit: ReadUntilCommit,
) -> AttemptResult:
    """Send a streaming `request` and read it up to its commit point (SPEC §8).

    Args:
        timeout_s: the attempt's limit until the first content, seconds.
        ttft_timeout_s: the first-token limit, seconds (None: `timeout_s`
            only); hitting it is a FIRST_TOKEN_TIMEOUT (fallback-now).
        read: reads a non-SSE answer (an error status, or a stray JSON body,
            which for a stream request is malformed).
        until_commit: the family's reader of the SSE events.

    Returns:
        The result; its `stream` holds the open response when committed.
        Otherwise the response is closed. Never raises for upstream trouble;
        cancellation propagates (the response is closed).
    """
    limit_s = timeout_s if ttft_timeout_s is None else min(timeout_s, ttft_timeout_s)
    ttft_bound = ttft_timeout_s is not None and ttft_timeout_s <= timeout_s
    response: httpx.Response | None = None
    committed = False
    try:
        async with asyncio.timeout(limit_s):
            response = await client.send(request, stream=True)
            if response.status_code != 200 or "text/event-stream" not in response.headers.get("content-type", ""):
                content = await response.aread()
                result = read(response.status_code, response.headers, content, time.time())
                if result.body is not None:
                    return AttemptResult(outcome=Outcome(
                        status=response.status_code, transport=TransportError.PROTOCOL,
                        message="upstream answered a stream request without SSE",
                    ))
                return result
            result = await until_commit(response)
            committed = result.stream is not None
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
