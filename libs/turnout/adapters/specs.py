"""The `CallSpec` of one call to a provider: what every call takes from the provider's config.

Owns: `provider_call`, the one place a provider's endpoint, credential and family fields
(`api_version`, `region`, `auth`, `headers`, `project`, `location`, `credentials_file`) are
copied into a call, for a client's attempt (`turnout.router.attempt`), a count
(`turnout.adapters.token_counts`) and an active probe (`turnout.adapters.probe_call`) alike.
"""

from __future__ import annotations

from typing import Any

from turnout.adapters.base import CallSpec
from turnout.config import ProviderConfig
from turnout.core.types import Target


def provider_call(
    provider: ProviderConfig, target: Target, *, body: bytes, timeout_s: float, request_id: str, **more: Any
) -> CallSpec:
    """The call of `target` at `provider` with `body` (bytes as sent), bounded by `timeout_s`
    (seconds), with the provider's own credential as resolved for the caller (`api_key`, "" for
    none); `more`: the call's other `CallSpec` fields (stream timeouts, operation, native body)."""
    return CallSpec(
        target=target,
        base_url=provider.base_url,
        api_key=provider.api_key or "",
        body=body,
        timeout_s=timeout_s,
        request_id=request_id,
        kind=provider.kind,
        api_version=provider.api_version,
        region=provider.region,
        auth=provider.auth,
        headers=provider.headers,
        project=provider.project,
        location=provider.location,
        credentials_file=provider.credentials_file,
        **more,
    )
