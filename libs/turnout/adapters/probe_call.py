"""The cheap call of an active probe, whatever the provider's family (issue #41 item 6).

Owns: `send_probe`, one probe call to one target with the provider's own credential:
`models` is the API's list of models (`GET {base_url}/models` on the OpenAI APIs;
`GET {base_url}/openai/models?api-version=...` with `api-key` on Azure OpenAI), read as a
success on any 2xx and as the family's error otherwise; `tiny_request` is a chat request
for one token of the target's model, sent and read by the family's own adapter
(`turnout.adapters.exchange.call_json`: translated, signed, or given its access token as a
client's request would be). Nothing here records anything: the caller classifies and
records the result (`turnout.health.results`).
Must not import: services, FastAPI, arq.
"""

from __future__ import annotations

import asyncio
import time
from typing import Final

import httpx

from turnout.adapters.base import (
    AttemptResult,
    CallSpec,
    describe_error,
    endpoint_url,
    error_status_outcome,
    upstream_body,
)
from turnout.adapters.exchange import call_json
from turnout.adapters.specs import provider_call
from turnout.adapters.transport import transport_error_of
from turnout.config import ProviderConfig
from turnout.config.providers import ProbeCall
from turnout.core.types import Outcome, Target, TransportError

TINY_REQUEST: Final = {
    "model": "",
    "messages": [{"role": "user", "content": "ping"}],
    "max_completion_tokens": 1,
}
"""The `tiny_request` probe: one short user message and a one-token answer (OpenAI form; each
family translates it as it does a client's)."""


def probe_spec(provider: ProviderConfig, target: Target, *, timeout_s: float, request_id: str) -> CallSpec:
    """The `tiny_request` call of `target` at `provider`, with the provider's own credential."""
    body = upstream_body(TINY_REQUEST, target)
    return provider_call(provider, target, body=body, timeout_s=timeout_s, request_id=request_id)


def models_request(client: httpx.AsyncClient, spec: CallSpec) -> httpx.Request:
    """`GET /models` of `spec`'s provider: Azure OpenAI's under `/openai` with its `api-version`
    and `api-key`; the OpenAI APIs' with the key where the provider sends it (`CallSpec.key_headers`).

    Raises:
        httpx.InvalidURL, ValueError: the base URL cannot be used.
    """
    headers = [("x-request-id", spec.request_id)]
    if spec.kind == "azure_openai":
        url = endpoint_url(spec.base_url, "/openai/models").copy_merge_params({"api-version": spec.api_version or ""})
        return client.build_request("GET", url, headers=[("api-key", spec.api_key), *headers])
    return client.build_request("GET", endpoint_url(spec.base_url, "/models"), headers=[*spec.key_headers(), *headers])


async def _list_models(client: httpx.AsyncClient, spec: CallSpec) -> AttemptResult:
    """The `models` probe: any 2xx is a success; a failure is read as the family reads errors."""
    try:
        async with asyncio.timeout(spec.timeout_s):
            response = await client.send(models_request(client, spec))
    except TimeoutError:
        message = f"no answer within {spec.timeout_s:.3f} s"
        return AttemptResult(outcome=Outcome(transport=TransportError.ATTEMPT_TIMEOUT, message=message))
    except (httpx.InvalidURL, ValueError) as exc:
        return AttemptResult(outcome=Outcome(transport=TransportError.CONNECT, message=type(exc).__name__))
    except Exception as exc:  # noqa: BLE001 - every transport failure becomes an Outcome
        kind = transport_error_of(exc)
        return AttemptResult(outcome=Outcome(transport=kind, message=describe_error(exc, kind)))
    if 200 <= response.status_code < 300:
        return AttemptResult(outcome=Outcome(status=response.status_code))
    return error_status_outcome(response.status_code, response.headers, response.content, time.time())


async def send_probe(
    client: httpx.AsyncClient,
    provider: ProviderConfig,
    target: Target,
    *,
    call: ProbeCall,
    timeout_s: float,
    request_id: str,
) -> AttemptResult:
    """One active probe of `target` (module doc); never raises for upstream trouble.

    Args:
        client: the process's shared upstream client.
        provider: the target's provider (its own credential is used).
        call: `models` or `tiny_request` (`ProbeConfig.call_for`).
        timeout_s: bound of the whole call, seconds.
        request_id: the probe's id (sent as `x-request-id`).
    """
    spec = probe_spec(provider, target, timeout_s=timeout_s, request_id=request_id)
    if call == "models":
        return await _list_models(client, spec)
    return await call_json(client, spec)
