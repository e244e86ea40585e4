"""The configuration file's documents beyond the catalog: orgs, limits, the breaker, egress, routing (SPEC §11).

Owns: the msgspec types of `turnout.yaml`'s sections other than `providers:`
and `models:` (those are `turnout.config.providers`), the whole file as
written (`RawConfig`) and a validated configuration (`Config`). A type's own
rules (ranges, lengths, enums) are in its annotations; the rules across
fields and sections are in `turnout.config.checks`.
Must not import: services, FastAPI, arq, httpx, other `turnout.config` modules but `providers`.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from turnout.config.providers import ModelConfig, ProviderConfig
from turnout.core.breaker import BreakerSettings
from turnout.core.ordering import PriceMix
from turnout.core.policy import MOST, Ceilings, Policy, PolicyOverrides
from turnout.core.scopes import ScopeSettings
from turnout.core.upstream_auth import ProviderAuth

AtLeastOne = Annotated[int, msgspec.Meta(ge=1, le=MOST)]
"""A count or a size that must be at least 1 (and at most 2^31-1, as every policy number)."""
SecondsAtLeastOne = Annotated[int, msgspec.Meta(ge=1, le=MOST, description="at least 1 s")]
DAY_S = 86_400.0
"""The longest deadline or lease in `gateway:` (seconds): a value past it means no deadline, which
the guards exist to prevent, and overflowed Redis's expiries."""
Port = Annotated[int, msgspec.Meta(ge=1, le=65535, description="a port is between 1 and 65535")]
EgressEntry = Annotated[
    str,
    msgspec.Meta(
        pattern=r"^[A-Za-z0-9_.:/\[\]-]+$",
        description="each entry is a CIDR, an address or a host name",
    ),
]
GatewayKey = Annotated[str, msgspec.Meta(min_length=8, description="a gateway key needs at least 8 characters")]


class KeyConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A gateway key. `key` is the secret as given; only its hash is kept."""

    name: str
    key: GatewayKey
    squad: str | None = None
    admin: bool = False
    settings: ScopeSettings = ScopeSettings()


class SquadConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A squad of an org and its settings."""

    settings: ScopeSettings = ScopeSettings()


class CustomEndpointConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A tenant-registered OpenAI-compatible endpoint (SPEC §6); `auth` and `headers` as a
    provider's (`ProviderConfig`), the header values sealed like the key when stored."""

    base_url: str
    api_key: str | None = None
    auth: ProviderAuth | None = None
    headers: dict[str, str] | None = None


class OrgConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An org: settings, BYOK keys, custom endpoints, squads and gateway keys."""

    settings: ScopeSettings = ScopeSettings()
    provider_keys: dict[str, str] = {}
    custom_endpoints: dict[str, CustomEndpointConfig] = {}
    squads: dict[str, SquadConfig] = {}
    keys: list[KeyConfig] = []


class BreakerConfig(BreakerSettings, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Circuit breaker thresholds (SPEC §5, §11 `breaker:`): the core's
    `turnout.core.breaker.BreakerSettings` (durations in seconds), plus
    `on_store_error`, the explicit Redis-outage policy: `closed` serves as if
    every breaker were CLOSED (logged), `fail` answers 503 (see turnout.health).
    """

    on_store_error: Literal["closed", "fail"] = "closed"

    def settings(self) -> BreakerSettings:
        """The thresholds as the pure core takes them."""
        fields = msgspec.structs.asdict(self)
        fields.pop("on_store_error")
        return BreakerSettings(**fields)


class GatewayConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Process-level limits.

    Attributes:
        max_body_bytes: largest accepted request body (413 above).
        max_queue_depth: queued jobs above which the ingress sheds with 503.
        result_ttl_s: how long a finished job's result stays readable.
        worker_max_jobs: concurrent jobs per worker process.
        worker_start_passes: jobs of one worker between their start and
            their first upstream call at once; the others wait their turn, oldest
            first, so jobs claimed together reach the upstream in order
            instead of all at once (`turnout_worker.start_gate`).
        ingress_max_streams: upstream connections an ingress keeps for
            streaming requests (the direct path).
        job_lease_s: lifetime of a running job's in-progress key, renewed
            while its worker lives; a killed worker's job is re-run within
            about this long.
        records_max: attempt records kept in the Redis stream (approximate,
            `XADD MAXLEN ~`); 0 writes none (SPEC §9).
        max_header_bytes: largest request head (request line + headers) the
            ingress reads; above it, 431. At least 4096: an SDK's request head
            is about 1 KB, and a smaller limit refuses every request.
        header_timeout_s: seconds the ingress waits for a whole request head
            (408 after; slow-loris guard).
        body_timeout_s: seconds it waits for a whole body after its head (408 after).
        max_connections: connections an ingress keeps open at once (503 beyond).
        responses_ttl_s: how long a stored Response of `POST /v1/responses` (and its
            conversation, for `previous_response_id`) is kept, seconds (default 30 days).
        responses_per_org: most stored Responses per org; the oldest are evicted beyond it.
        responses_max_bytes: largest stored Response document (its whole conversation,
            JSON bytes); a larger one is answered but not kept.
        refusals_max_per_org: door-refusal rows kept per org, and for the callers not
            identified, each in its own Redis stream (approximate, `XADD MAXLEN ~`);
            0 stores none (they are still counted and logged; README "Door refusals").
        default_completion_tokens: the completion tokens a request that sends no `max_tokens`
            (and meets no `max_tokens` ceiling) is assumed to use, per choice, when admission
            reserves its worst case against a hard budget (README "Budgets"); 1 to 2³¹ − 1.
    """

    max_body_bytes: AtLeastOne = 4 * 1024 * 1024
    max_queue_depth: AtLeastOne = 10_000
    result_ttl_s: AtLeastOne = 300
    worker_max_jobs: AtLeastOne = 500
    worker_start_passes: AtLeastOne = 8
    ingress_max_streams: AtLeastOne = 2000
    job_lease_s: Annotated[float, msgspec.Meta(ge=1, le=DAY_S, description="1 s to a day")] = 10.0
    records_max: Annotated[int, msgspec.Meta(ge=0, le=MOST)] = 100_000
    max_header_bytes: Annotated[int, msgspec.Meta(ge=4096, le=MOST)] = 64 * 1024
    header_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=DAY_S, description="above 0, a day at most")] = 10.0
    body_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=DAY_S, description="above 0, a day at most")] = 30.0
    max_connections: AtLeastOne = 10_000
    responses_ttl_s: Annotated[int, msgspec.Meta(ge=60, le=31_622_400, description="a minute to 366 days")] = 2_592_000
    responses_per_org: AtLeastOne = 1000
    responses_max_bytes: Annotated[int, msgspec.Meta(ge=1024, le=MOST)] = 8 * 1024 * 1024
    refusals_max_per_org: Annotated[int, msgspec.Meta(ge=0, le=MOST)] = 1000
    default_completion_tokens: Annotated[int, msgspec.Meta(ge=1, le=2**31 - 1, description="1 to 2^31 - 1")] = 4096


class EgressConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Where tenant custom endpoints may point (`turnout.rules.ssrf`; README "Secrets and the SSRF guard").

    Attributes:
        schemes: URL schemes allowed besides `https`.
        ports: ports allowed besides 443 and 8443, or `any`.
        allow: CIDRs and host names admitted past the SSRF guard, as in
            `TURNOUT_SSRF_ALLOW` (both apply); never a metadata address.
    """

    schemes: list[Literal["http", "https"]] = []
    ports: list[Port] | Literal["any"] = []
    allow: list[EgressEntry] = []


class RoutingConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Gateway-wide facts of the ordering strategies (SPEC §10; `routing:`).

    Attributes:
        price_mix: relative weights of input and output tokens in a typical
            request; `price` and `balanced` rank offers by
            `(input · in_price + output · out_price) / (input + output)`.
        speed_alpha: weight of the newest attempt in the fleet's rolling
            measures of latency and output rate (an exponentially weighted
            moving average; 0 < alpha <= 1).
        speed_ttl_s: a target's measures are forgotten (it ranks neutral
            again) when no attempt has updated them for this many seconds.
    """

    price_mix: PriceMix = PriceMix()
    speed_alpha: Annotated[float, msgspec.Meta(gt=0, le=1, description="a weight in (0, 1]")] = 0.2
    speed_ttl_s: SecondsAtLeastOne = 3600


class RawConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The file as written (after interpolation), before cross-checks."""

    providers: dict[str, ProviderConfig]
    models: dict[str, ModelConfig]
    policy: PolicyOverrides = PolicyOverrides()
    ceilings: Ceilings = Ceilings()
    breaker: BreakerConfig = BreakerConfig()
    gateway: GatewayConfig = GatewayConfig()
    routing: RoutingConfig = RoutingConfig()
    egress: EgressConfig = EgressConfig()
    orgs: dict[str, OrgConfig] = {}


class Config(msgspec.Struct, frozen=True, kw_only=True):
    """A validated configuration.

    Attributes:
        raw: the file's content.
        policy: the gateway-wide policy (SPEC defaults overlaid with `policy:`).
        source: where it was read from (for messages), or "<memory>".
    """

    raw: RawConfig
    policy: Policy
    source: str = "<memory>"


def embedding_models(raw: RawConfig) -> frozenset[str]:
    """The catalog ids of `raw`'s models of `type: embedding`."""
    return frozenset(name for name, spec in raw.models.items() if spec.type == "embedding")
