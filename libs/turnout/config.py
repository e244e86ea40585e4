"""Configuration file: load, interpolate, validate (SPEC §11).

Owns: the YAML schema of `turnout.yaml`, `${NAME}` environment interpolation,
and every validation that refuses a bad file at start with the offending path
named (unknown provider, unknown model, malformed `custom:` entry, fallback
cycle, a value over a ceiling, a provider key read from one of Turnout's own
`TURNOUT_*` variables or a provider at a cloud metadata address:
`turnout.catalog.provider_rules`). Nothing half-loads: `load_config` returns a
complete `Config` or raises `ConfigError`.
Must not import: services, FastAPI, arq, httpx.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal

import msgspec
import yaml

from turnout.aws import config_rules as aws_rules
from turnout.catalog import provider_rules
from turnout.catalog.google_fields import check_google_fields
from turnout.config_errors import collect, report
from turnout.config_yaml import load_yaml
from turnout.core.breaker import BreakerSettings
from turnout.core.model_types import ModelType, naming_embedding_models
from turnout.core.ordering import OrderName, PriceMix
from turnout.core.policy import (
    MOST,
    Ceilings,
    FallbackOverrides,
    Policy,
    PolicyOverrides,
    clamp_policy,
    merge_policy,
)
from turnout.core.scopes import ScopeSettings, as_model_map, named_models
from turnout.core.upstream_auth import AUTH_KINDS, ProviderAuth, Refused, auth_refusal, headers_refusal
from turnout.errors import ConfigError
from turnout.tenancy.text import check_id, check_model, check_secret, check_url, short_name

if TYPE_CHECKING:
    from turnout.tenancy.ssrf import AllowList

ProviderKind = Literal[
    "openai",
    "openai_compatible",
    "anthropic",
    "azure_openai",
    "bedrock",
    "gemini",
    "vertex",
]
EMBEDDING_KINDS: tuple[ProviderKind, ...] = ("openai", "openai_compatible", "azure_openai", "gemini", "vertex")
"""The provider kinds whose API serves embeddings (`POST {base_url}/embeddings`; Azure's under its deployment)."""
API_VERSION_KINDS: tuple[ProviderKind, ...] = ("azure_openai",)
"""The provider kinds whose requests name an API version (`api-version=`), required in their config."""
API_VERSION_PATTERN: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}(?:-preview)?")
"""An Azure OpenAI data-plane API version (`2024-10-21`, `2025-01-01-preview`), sent in the query string."""
OfferApi = Literal["chat", "responses"]
"""The upstream API an offer is called at: `chat` (its provider kind's own chat API), or `responses`
(`POST {base_url}/responses`, the OpenAI Responses API, for models that exist only there; such an
offer serves only requests that came on `/v1/responses`, sent as the client sent them)."""
RESPONSES_KINDS: tuple[ProviderKind, ...] = ("openai", "openai_compatible")
"""The provider kinds an `api: responses` offer may name."""


TOKEN_KINDS: tuple[ProviderKind, ...] = ("vertex",)
"""The provider kinds whose credential is a service account (`credentials_file`): they take no
`api_key`, and no org registers its own key for them."""
SERVICE_ACCOUNT_ONLY: Final = "a `vertex` provider's credential is its service account (credentials_file), not a key"
"""Why a key is refused for a `TOKEN_KINDS` provider (the message after its path)."""


def embedding_models(raw: RawConfig) -> frozenset[str]:
    """The catalog ids of `raw`'s models of `type: embedding`."""
    return frozenset(name for name, spec in raw.models.items() if spec.type == "embedding")


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
UsdPerMtok = Annotated[
    float,
    msgspec.Meta(
        ge=0,
        le=1_000_000,
        description="a price in USD per million tokens, 0 to 1000000",
    ),
]
ContextWindow = Annotated[int, msgspec.Meta(ge=1, le=1_000_000_000, description="a token count, 1 to 1000000000")]
GatewayKey = Annotated[str, msgspec.Meta(min_length=8, description="a gateway key needs at least 8 characters")]


class ProviderConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One upstream provider.

    Attributes:
        kind: wire API family it speaks.
        base_url: API root (`https://api.openai.com/v1`).
        api_key: the shared (platform) credential; None or "" = none
            configured (its offers are skipped as NO_CREDENTIAL).
        api_version: the API version every request names (`azure_openai`: the `api-version`
            query parameter, `2024-10-21`); required for that kind, refused on the others
            (README "Providers: Azure OpenAI").
        auth: the header the key goes in and its scheme (`turnout.core.upstream_auth.ProviderAuth`;
            None: `authorization: Bearer`); `openai_compatible` only.
        headers: extra headers every request carries (values may be `${VAR}`; treated as
            secrets: never logged); `openai_compatible` only.
        region: a `bedrock` provider's AWS region (`us-east-1`: SigV4's signing region);
            required for that kind, refused on the others (README "Providers: Amazon Bedrock").
        access_key_id, secret_access_key, session_token: a `bedrock` provider's AWS keys
            (`${VAR}` like `api_key`), both keys or neither (then botocore's credential chain);
            folded at load into `api_key` as one Bedrock key (`turnout.aws.keys`), so they are
            None in a loaded config (`turnout.aws.config_rules.folded_key`).
        project, location, credentials_file: a `vertex` provider's Google Cloud project id,
            Vertex AI location (`us-central1`) and service-account key file (its path), all
            three required for that kind and refused on the others
            (`turnout.catalog.google_fields`, README "Providers: Vertex AI").
    """

    kind: ProviderKind
    base_url: str
    api_key: str | None = None
    api_version: str | None = None
    auth: ProviderAuth | None = None
    headers: dict[str, str] | None = None
    # bedrock (turnout.aws.config_rules)
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None
    # vertex (turnout.catalog.google_fields)
    project: str | None = None
    location: str | None = None
    credentials_file: str | None = None

    def secrets(self) -> list[str]:
        """What the scrubber must never let out for this provider: its key and its extra
        header values (`turnout.scrub`), the empty ones left out."""
        return [s for s in (self.api_key, *(self.headers or {}).values()) if s]


def has_shared_credential(provider: ProviderConfig) -> bool:
    """Whether calls to `provider` have the operator's credential: its `api_key`; for a `vertex`
    provider its service-account file (an access token is made from it at call time); for a
    `bedrock` provider without keys botocore's credential chain (README "Providers: Amazon
    Bedrock"; a chain that finds nothing fails the attempt as an auth failure)."""
    return bool(provider.api_key or provider.credentials_file) or provider.kind == aws_rules.KIND


class OfferConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One (provider, model) offer of a catalog model; prices in USD per million tokens.

    `supports_prefill`: the model accepts an assistant message as the last
    message (a prefill it continues); false for models that refuse it.
    `api`: the upstream API it is called at (`OfferApi`; `responses` only on
    `RESPONSES_KINDS` providers, README "The Responses surface"); read it as
    `api_in_force`. The default (`chat`, given or not) is held as UNSET, which is never
    encoded: a stored catalog without `api: responses` offers stays byte for byte what
    versions before the field wrote and read (their file digest included).
    """

    provider: str
    model: str
    input_usd_per_mtok: UsdPerMtok = 0.0
    output_usd_per_mtok: UsdPerMtok = 0.0
    supports_prefill: bool = True
    api: OfferApi | msgspec.UnsetType = msgspec.UNSET

    def __post_init__(self) -> None:
        """`api: chat` is the default: held as UNSET, so it is never stored (class doc)."""
        if self.api == "chat":
            msgspec.structs.force_setattr(self, "api", msgspec.UNSET)

    @property
    def api_in_force(self) -> OfferApi:
        """The offer's upstream API: `chat` unless it says `responses`."""
        return "chat" if isinstance(self.api, msgspec.UnsetType) else self.api


class ModelConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A catalog model.

    Attributes:
        offers: its (provider, model) offers.
        context_window: context window in tokens, when known.
        order: the ordering strategy of its offers (`turnout.core.ordering.ORDERINGS`):
            `health` (SPEC §5: by recent success rate, ties shuffled),
            `priority` (the configured order: a primary and backups), `price`,
            `latency`, `throughput` or `balanced` (SPEC §10).
        type: what it serves (`turnout.core.model_types`): `chat` (chat completions,
            messages, legacy completions) or `embedding` (`POST /v1/embeddings`; its
            offers only: no setting may name it, README "Embeddings").
    """

    offers: Annotated[list[OfferConfig], msgspec.Meta(min_length=1, description="a model needs at least one offer")]
    context_window: ContextWindow | None = None
    order: OrderName = "health"
    type: ModelType = "chat"


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
    """Where tenant custom endpoints may point (`turnout.tenancy.ssrf`; README "Secrets and the SSRF guard").

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


EXTENSION_PREFIX = "x-"
"""Top-level keys starting with it are the file's own (blocks for YAML anchors: `x-defaults: &d ...`),
read by YAML and then ignored."""

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_ENV_REF = re.compile(r"""\$\{[^}\n"']*\}""")
"""A `${...}` to shield from YAML: no `}`, newline or quote inside (a quote closes the scalar it is in)."""


def _shield_env(text: str) -> tuple[str, re.Pattern[str], list[str]]:
    """Swap each `${...}` for a plain-scalar placeholder before YAML parsing.

    `${NAME}` is not a valid plain scalar inside a YAML flow mapping (the SPEC
    §11 example writes `{..., api_key: ${OPENAI_API_KEY}}`), so the text is
    parsed with placeholders that `_unshield` puts back afterwards.
    """
    prefix = "__turnout_env_"
    while prefix in text:
        prefix = "_" + prefix
    refs: list[str] = []

    def sub(m: re.Match[str]) -> str:
        refs.append(m.group(0))
        return f"{prefix}{len(refs) - 1}__"

    return _ENV_REF.sub(sub, text), re.compile(re.escape(prefix) + r"(\d+)__"), refs


def _unshield_mark(mark: Any, shielded: str, original: str, token: re.Pattern[str], refs: list[str]) -> None:
    """Point a PyYAML error mark of the shielded text at the same place in `original`.

    A placeholder is longer than most `${...}` it stands for, so the mark's
    column (and the snippet PyYAML quotes around it) would be off by the
    difference, and the snippet could show a cut placeholder. A mark inside
    a placeholder points at its reference's `$`. Line numbers need no
    change: neither a placeholder nor a reference holds a line break.
    """
    line_start = mark.pointer - mark.column
    before_line = in_line = 0
    for m in token.finditer(shielded):
        if m.start() >= mark.pointer:
            break
        shift = mark.pointer - m.start() if m.end() > mark.pointer else len(m.group(0)) - len(refs[int(m.group(1))])
        if m.start() >= line_start:
            in_line += shift
        else:
            before_line += shift
    mark.buffer = original + "\0"  # as PyYAML's reader holds a string
    mark.pointer = mark.index = mark.pointer - before_line - in_line
    mark.column -= in_line


def _unshield(node: Any, token: re.Pattern[str], refs: list[str]) -> Any:
    if isinstance(node, dict):
        return {_unshield(k, token, refs): _unshield(v, token, refs) for k, v in node.items()}
    if isinstance(node, list):
        return [_unshield(v, token, refs) for v in node]
    if isinstance(node, str):
        return token.sub(lambda m: refs[int(m.group(1))], node)
    return node


def _interpolate(node: Any, env: Mapping[str, str], path: str, missing: list[str] | None = None) -> Any:
    """`node` with `${NAME}` / `${NAME:-default}` replaced from `env`.

    Raises:
        ConfigError: every unset variable without a default, and every `${` that starts no
            reference (a missing `}`, a name with a space), one line each.
    """
    top = missing is None
    missing = [] if missing is None else missing
    if isinstance(node, dict):
        out: Any = {k: _interpolate(v, env, f"{path}.{k}" if path else str(k), missing) for k, v in node.items()}
    elif isinstance(node, list):
        out = [_interpolate(v, env, f"{path}[{i}]", missing) for i, v in enumerate(node)]
    elif isinstance(node, str) and "${" in node:

        def sub(m: re.Match[str]) -> str:
            name, default = m.group(1), m.group(2)
            if name in env:
                return env[name]
            if default is not None:
                return default
            missing.append(f"{path}: environment variable {name} is not set (write ${{{name}:-}} to allow empty)")
            return ""

        out = _ENV.sub(sub, node)
        stray = _ENV.sub(lambda m: " " * len(m.group(0)), node).find("${")  # a reference's own `${` is blanked
        if stray >= 0:  # a typo (`${KEY`, `${A B}`) would be sent as is; the value is not shown (it may be a key)
            missing.append(
                f"{path}: `${{` at character {stray + 1} does not start a variable reference: write ${{NAME}} or "
                "${NAME:-default} (NAME: letters, digits and _, not starting with a digit)"
            )
    else:
        out = node
    if top and missing:
        raise ConfigError(report(missing), missing)
    return out


def _sent_strings(data: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """Each string of the file that Turnout sends to an upstream or keeps in the catalog, with its
    path, as written: every string of `providers:` and `models:` (keys, base URLs, model names:
    a URL or a model name reaches the provider, and the catalog in Redis shows them in clear),
    `orgs.*.provider_keys.*`, `orgs.*.custom_endpoints.*.api_key`."""
    for section in ("providers", "models"):
        yield from _strings(data.get(section), section)
    orgs = data.get("orgs")
    for org_name, org in orgs.items() if isinstance(orgs, dict) else ():
        if not isinstance(org, dict):
            continue
        byok = org.get("provider_keys")
        for provider_name, secret in byok.items() if isinstance(byok, dict) else ():
            yield f"orgs.{org_name}.provider_keys.{provider_name}", secret
        endpoints = org.get("custom_endpoints")
        for endpoint_name, endpoint in endpoints.items() if isinstance(endpoints, dict) else ():
            if isinstance(endpoint, dict):
                yield f"orgs.{org_name}.custom_endpoints.{endpoint_name}.api_key", endpoint.get("api_key")
                yield from _strings(
                    endpoint.get("headers"), f"orgs.{org_name}.custom_endpoints.{endpoint_name}.headers"
                )


def _strings(node: Any, path: str) -> Iterator[tuple[str, Any]]:
    """Every string under `node`, with its dotted path (`models.m.offers[0].model`)."""
    if isinstance(node, str):
        yield path, node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _strings(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _strings(value, f"{path}[{i}]")


_AWS_SECRET_FIELDS: Final = (".access_key_id", ".secret_access_key", ".session_token")
"""A `bedrock` provider's key fields (`_is_key`)."""


def _is_key(path: str) -> bool:
    """Whether the field at `path` (from `_sent_strings`) is a key, not a URL or a model name."""
    return path.endswith((".api_key", *_AWS_SECRET_FIELDS)) or not path.startswith(("providers.", "models."))


def _check_key_references(data: Mapping[str, Any]) -> None:
    """Refuse a `${NAME}` of one of Turnout's own variables in any string sent upstream (`_sent_strings`:
    keys, base URLs, model names), before interpolation (`turnout.catalog.provider_rules`:
    `${TURNOUT_SECRET_KEY}` would send the vault's key to a provider).

    Raises:
        ConfigError: one line per reference, naming the field and the variable.
    """
    errors = [
        f"{path}: `${{{m.group(1)}}}` "
        + (provider_rules.OWN_VARIABLE if _is_key(path) else provider_rules.OWN_VARIABLE_SENT)
        for path, value in _sent_strings(data)
        if isinstance(value, str)
        for m in _ENV.finditer(value)
        if provider_rules.is_own_variable(m.group(1))
    ]
    if errors:
        raise ConfigError(report(errors), errors)


def _path_of(exc: msgspec.ValidationError) -> str:
    """The dotted path of a validation error of a policy (an unknown field is named too)."""
    text = str(exc)
    m = re.search(r"at `\$(.*)`", text)
    path = m.group(1) if m else ""
    unknown = re.match(r"Object contains unknown field `([^`]*)`", text)
    if unknown:
        path += f".{unknown.group(1)}"
    return path.lstrip(".") or "(top level)"


def parse_config(text: str, *, env: Mapping[str, str] | None = None, source: str = "<memory>") -> Config:
    """Parse and validate configuration text (YAML).

    Args:
        text: the YAML document.
        env: variables for `${NAME}` / `${NAME:-default}`; defaults to
            `os.environ`.
        source: a name for messages.

    Returns:
        A validated `Config`.

    Raises:
        ConfigError: the message names the offending path, e.g.
            `models.gpt-5.offers[1].provider: unknown provider 'azure-east'`;
            type errors (unknown fields with a "did you mean", missing
            fields, wrong types and ranges, enum values with the allowed
            ones) are all reported at once, one per line.
    """
    shielded, token, refs = _shield_env(text)
    try:
        data = _unshield(load_yaml(shielded), token, refs)
    except yaml.YAMLError as exc:
        for mark in (getattr(exc, "context_mark", None), getattr(exc, "problem_mark", None)):
            if mark is not None and mark.buffer is not None:
                mark.name = source  # PyYAML names a string `<unicode string>`: name the file instead
                _unshield_mark(mark, shielded, text, token, refs)
        shown = token.sub(lambda m: refs[int(m.group(1))], str(exc))  # the file's own text, not the placeholders
        raise ConfigError(f"{source}: not valid YAML: {shown}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the configuration must be a mapping with `providers` and `models`")
    data = {k: v for k, v in data.items() if not (isinstance(k, str) and k.startswith(EXTENSION_PREFIX))}
    _check_key_references(data)
    data = _interpolate(data, os.environ if env is None else env, "")
    try:
        raw = msgspec.convert(data, RawConfig)
    except msgspec.ValidationError as exc:  # report every type error of the file at once, each with its path
        errors = collect(data, RawConfig) or [f"{_path_of(exc)}: {str(exc).split(' - at ')[0]}"]
        raise ConfigError(report(errors), errors) from exc
    raw = msgspec.structs.replace(raw, providers=_folded(raw.providers))
    policy = merge_policy(Policy(), raw.policy)
    config = Config(raw=raw, policy=policy, source=source)
    _validate(raw, policy, _egress_allow(config, os.environ if env is None else env))
    return config


def egress_policy(config: Config, env: Mapping[str, str]) -> AllowList:
    """The egress policy for tenant endpoints: https on 443 / 8443, widened by the configuration's
    `egress:` section, with `TURNOUT_SSRF_ALLOW` and `egress.allow` admitted past the SSRF guard.

    Raises:
        ValueError: a malformed allow-list entry (the entry named).
    """
    from turnout.tenancy.ssrf import AllowList

    egress = config.raw.egress
    return AllowList.from_env(env).widened(
        schemes=egress.schemes,
        ports=None if egress.ports == "any" else egress.ports,
        entries=egress.allow,
    )


def _egress_allow(config: Config, env: Mapping[str, str]) -> AllowList:
    """`egress_policy`, the policy the fleet checks the file's custom endpoints against when it merges
    its orgs, for the file's own check.

    Raises:
        ConfigError: an `egress.allow` entry that is neither a CIDR nor a host name (its index named),
            or a malformed `TURNOUT_SSRF_ALLOW`.
    """
    from turnout.tenancy.ssrf import AllowList

    for i, entry in enumerate(config.raw.egress.allow):
        try:
            AllowList.parse(entry)
        except ValueError:
            raise ConfigError(f"egress.allow[{i}]: {entry!r} is neither a CIDR nor a host name") from None
    try:
        return egress_policy(config, env)
    except ValueError as exc:  # names TURNOUT_SSRF_ALLOW and its entry
        raise ConfigError(str(exc)) from None


def load_config(path: str | os.PathLike[str], *, env: Mapping[str, str] | None = None) -> Config:
    """Read and validate a configuration file (see `parse_config`).

    Raises:
        ConfigError: the file is missing, unreadable or invalid.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p}: not UTF-8 text (byte {exc.start}); a configuration is a YAML text file") from exc
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read the configuration file: {exc.strerror}") from exc
    return parse_config(text, env=env, source=str(p))


def with_catalog(
    config: Config,
    providers: Mapping[str, ProviderConfig],
    models: Mapping[str, ModelConfig],
    *,
    check: bool = True,
) -> Config:
    """`config` with its catalog (`providers:` and `models:`) replaced, validated whole as a file is.

    The run-time catalog's entry point (`turnout.catalog.doc`): the same
    rules apply to an admin edit as to the file, cross-references included
    (a model a fallback or an org of the file names cannot be removed).
    `check=False` skips the validation (a catalog already validated where it
    was written, read by a process whose own file disagrees).

    Raises:
        ConfigError: the message names the offending path, as `parse_config`.
    """
    raw = msgspec.structs.replace(config.raw, providers=_folded(providers), models=dict(models))
    if check:  # the types' own rules first (`msgspec.Meta` ranges), as decoding a file checks them
        errors = collect(msgspec.to_builtins(raw.providers), dict[str, ProviderConfig], "providers") + collect(
            msgspec.to_builtins(raw.models), dict[str, ModelConfig], "models"
        )
        if errors:
            raise ConfigError(report(errors), errors)
        _validate(raw, config.policy)
    return Config(raw=raw, policy=config.policy, source=config.source)


def _folded(providers: Mapping[str, ProviderConfig]) -> dict[str, ProviderConfig]:
    """`providers` with each `bedrock` provider's key fields folded into its `api_key`
    (`turnout.aws.config_rules.folded_key`; the fields then None).

    Raises:
        ConfigError: a key field without its pair, named by its path.
    """
    out = dict(providers)
    for name, provider in providers.items():
        key = aws_rules.folded_key(f"providers.{name}", provider)
        if key is not None:
            out[name] = msgspec.structs.replace(
                provider, api_key=key, access_key_id=None, secret_access_key=None, session_token=None
            )
    return out


def _check_policy(path: str, partial: PolicyOverrides, base: Policy, ceilings: Ceilings) -> None:
    _, clamps = clamp_policy(merge_policy(base, partial), ceilings)
    if clamps:
        c = clamps[0]
        raise ConfigError(f"{path}.{c.path}: {c.requested} is outside the allowed range (at most/least {c.applied})")


def _check_models(path: str, models: list[str], catalog: Mapping[str, ModelConfig], org: OrgConfig | None) -> None:
    for i, model in enumerate(models):
        check_model(f"{path}[{i}]", model)
        if model.startswith("custom:"):
            parts = model.split(":", 2)  # the model name may hold colons (`llama3:8b`)
            if len(parts) != 3 or not parts[1] or not parts[2]:
                raise ConfigError(
                    f"{path}[{i}]: malformed entry {model!r}; expected custom:<provider_key_id>:<model_name>"
                )
            if org is None or parts[1] not in org.custom_endpoints:
                raise ConfigError(f"{path}[{i}]: {model!r} names no custom endpoint of this org")
            continue
        if model not in catalog:
            raise ConfigError(f"{path}[{i}]: unknown model {model!r} (not in `models`)")


def _check_cycles(path: str, model_map: Mapping[str, tuple[str, ...]]) -> None:
    graph = {k: v for k, v in model_map.items() if k != "*"}
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in graph.get(node, ()):
            if nxt == node or state.get(nxt) == 1:
                cycle = trail[trail.index(nxt) :] + [nxt] if nxt in trail else [node, nxt]
                raise ConfigError(f"{path}: fallback cycle {' -> '.join(cycle)}")
            if nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = 2

    for start in graph:
        if start not in state:
            visit(start, [start])


def _check_scope(path: str, settings: ScopeSettings, raw: RawConfig, policy: Policy, org: OrgConfig | None) -> None:
    refused = naming_embedding_models(((f"{path}.{p}", m) for p, m in named_models(settings)), embedding_models(raw))
    if refused is not None:
        raise ConfigError(refused)
    if isinstance(settings.reroutes, list):
        _check_models(f"{path}.reroutes", settings.reroutes, raw.models, org)
    for name in ("fallbacks", "context_window_fallbacks", "content_policy_fallbacks", "plan_fallbacks"):
        value = getattr(settings, name)
        model_map = as_model_map(value)
        for key, models in model_map.items():
            sub = f"{path}.{name}" if isinstance(value, list) else f"{path}.{name}.{key}"
            if key != "*" and key not in raw.models:
                raise ConfigError(f"{path}.{name}: unknown model {key!r} (not in `models`)")
            _check_models(sub, list(models), raw.models, org)
        if name == "fallbacks":
            _check_cycles(f"{path}.{name}", model_map)
    if isinstance(settings.policy, PolicyOverrides):
        _check_policy(f"{path}.policy", settings.policy, policy, raw.ceilings)
        fallback = settings.policy.fallback
        if isinstance(fallback, FallbackOverrides) and isinstance(fallback.models, tuple):
            # the same check as `settings.fallbacks`
            _check_models(f"{path}.policy.fallback.models", list(fallback.models), raw.models, org)
    if isinstance(settings.strategy, list):
        names: set[str] = set()
        for i, rule in enumerate(settings.strategy):
            if rule.name in names:
                raise ConfigError(f"{path}.strategy[{i}].name: rule {rule.name!r} is declared twice")
            names.add(rule.name)
            for what, model in (("model", rule.model), ("fallback", rule.fallback)):
                if model is not None and model not in raw.models:
                    raise ConfigError(f"{path}.strategy[{i}].{what}: unknown model {model!r} (not in `models`)")


def check_scope_settings(path: str, settings: ScopeSettings, config: Config, org: OrgConfig | None) -> None:
    """Validate one scope's settings as the file's are (the admin API's entry point, SPEC §11).

    Args:
        path: where the settings sit, for messages (`squads.research.settings`).
        settings: the scope's settings.
        config: the validated configuration (catalog, gateway policy, ceilings).
        org: the org whose custom endpoints `custom:` entries may name.

    Raises:
        ConfigError: the message names the offending path (unknown model,
            malformed `custom:` entry, fallback cycle, policy over a ceiling).
    """
    _check_scope(path, settings, config.raw, config.policy, org)


def _check_endpoint_url(path: str, url: str, allow: AllowList) -> None:
    """The SSRF check of a custom endpoint's base URL (`turnout.tenancy.ssrf.check_base_url`, no DNS)."""
    from turnout.tenancy.ssrf import UnsafeURL, check_base_url

    try:
        check_base_url(url, allow)
    except UnsafeURL as exc:
        raise ConfigError(f"{path}: refused: {exc}") from None


def _check_api_version(path: str, provider: ProviderConfig) -> None:
    """`api_version`: required for the kinds that name one (`API_VERSION_KINDS`), of Azure's form
    (`API_VERSION_PATTERN`), and refused on the others (their APIs have no such parameter); the
    `base_url` of such a kind is the resource's endpoint, its path holding no `/openai` segment
    (the family adds `/openai/deployments/...`; README "Providers: Azure OpenAI").

    Raises:
        ConfigError: the message names `{path}.api_version` or `{path}.base_url`.
    """
    if provider.kind not in API_VERSION_KINDS:
        if provider.api_version is not None:
            raise ConfigError(
                f"{path}.api_version: only an `azure_openai` provider takes an api_version, "
                f"this one is `{provider.kind}`"
            )
        return
    if not provider.api_version:
        raise ConfigError(
            f"{path}.api_version: an `{provider.kind}` provider needs its API version "
            '(api_version: "2024-10-21", https://learn.microsoft.com/azure/ai-services/openai/reference)'
        )
    if not API_VERSION_PATTERN.fullmatch(provider.api_version):
        raise ConfigError(
            f"{path}.api_version: {provider.api_version!r} is not an API version such as 2024-10-21 "
            "or 2025-01-01-preview"
        )
    if re.search(r"/openai(?:/|$)", provider.base_url.split("?", 1)[0].split("#", 1)[0].rstrip("/")):
        raise ConfigError(  # the family adds `/openai/deployments/...` itself
            f"{path}.base_url: an `azure_openai` base_url is the resource's endpoint without /openai "
            "(https://myres.openai.azure.com)"
        )


def _a(word: str) -> str:
    """The article before `word` in a message: `an azure_openai`, `a bedrock`."""
    return "an" if word[:1] in ("a", "e", "i", "o", "u") else "a"


def check_provider_auth(path: str, provider: ProviderConfig) -> None:
    """`auth` and `headers`: only on the kinds that take them (`AUTH_KINDS`), each sendable.

    Raises:
        ConfigError: naming `{path}.auth...` or `{path}.headers...` (README "Providers: any
            OpenAI-compatible endpoint").
    """
    for field, value in (("auth", provider.auth), ("headers", provider.headers)):
        if value is not None and provider.kind not in AUTH_KINDS:
            raise ConfigError(
                f"{path}.{field}: only an {' or '.join(AUTH_KINDS)} provider takes `{field}` "
                f"({_a(provider.kind)} `{provider.kind}` provider's API fixes how its key is sent)"
            )
    _check_sendable(path, provider.auth, provider.headers)


def _check_sendable(path: str, auth: ProviderAuth | None, headers: dict[str, str] | None) -> None:
    """`auth` and `headers` of a provider or a custom endpoint at `path` can be sent.

    Raises:
        ConfigError: the field named (`turnout.core.upstream_auth`).
    """
    refused: Refused | None = None
    if auth is not None:
        refused = auth_refusal(f"{path}.auth", auth)
    if refused is None and headers is not None:
        refused = headers_refusal(f"{path}.headers", headers, auth)
    if refused is not None:
        raise ConfigError(str(refused))


def _validate(raw: RawConfig, policy: Policy, allow: AllowList | None = None) -> None:
    """Every rule of a file beyond its types; `allow`: check the orgs' custom endpoint base URLs
    as the ingress does when it merges them into Redis (None: a catalog edit, orgs checked at load)."""
    if not raw.models:
        raise ConfigError("models: the catalog is empty; declare at least one model with an offer")
    r = raw.routing
    if r.price_mix.input < 0 or r.price_mix.output < 0 or r.price_mix.input + r.price_mix.output <= 0:
        raise ConfigError("routing.price_mix: weights must be at least 0 and not both 0")
    b = raw.breaker
    if b.max_cooldown_s < b.cooldown_s:
        raise ConfigError(f"breaker.max_cooldown_s: must be at least cooldown_s ({b.cooldown_s:g} s)")
    for name, provider in raw.providers.items():
        check_model(f"providers.{short_name(name)}", name)  # provider names travel in headers (`x-turnout-provider`)
        if not re.fullmatch(r"https?://[^/?#\s@]+(?:[/?#]\S*)?", provider.base_url):
            raise ConfigError(f"providers.{name}.base_url: must be an http(s) URL without credentials")
        if "?" in provider.base_url or "#" in provider.base_url:  # the families append their path (and query) to it
            raise ConfigError(
                f"providers.{name}.base_url: must not carry a query (?...) or a fragment (#...): each call "
                "appends its own path to it (a credential goes in api_key or headers, never in the URL)"
            )
        check_url(f"providers.{name}.base_url", provider.base_url)
        provider_rules.check_base_url(f"providers.{name}.base_url", provider.base_url)
        if "/" in name:
            raise ConfigError(f"providers.{name}: a provider name cannot contain '/'")
        if provider.api_key:
            check_secret(f"providers.{name}.api_key", provider.api_key, platform=True)
        _check_api_version(f"providers.{name}", provider)
        check_provider_auth(f"providers.{name}", provider)
        aws_rules.check_fields(f"providers.{name}", provider)
        check_google_fields(
            f"providers.{name}",
            provider.kind,
            provider.base_url,
            project=provider.project,
            location=provider.location,
            credentials_file=provider.credentials_file,
        )
        if provider.kind in TOKEN_KINDS and provider.api_key is not None:
            raise ConfigError(f"providers.{name}.api_key: {SERVICE_ACCOUNT_ONLY}")
    facts: dict[tuple[str, str], tuple[str, tuple[float, float, bool, str]]] = {}
    for model, spec in raw.models.items():
        check_model(f"models.{short_name(model)}", model)  # ids and names travel in headers (`x-turnout-model`)
        listed: dict[tuple[str, str], int] = {}
        for i, offer in enumerate(spec.offers):
            check_model(f"models.{model}.offers[{i}].model", offer.model)
            if offer.provider not in raw.providers:
                raise ConfigError(f"models.{model}.offers[{i}].provider: unknown provider {offer.provider!r}")
            kind = raw.providers[offer.provider].kind
            if spec.type == "embedding" and kind not in EMBEDDING_KINDS:
                raise ConfigError(
                    f"models.{model}.offers[{i}].provider: {offer.provider!r} is {_a(kind)} `{kind}` provider, which "
                    f"serves no embeddings; an embedding model's offers need a provider of kind "
                    f"{' or '.join(EMBEDDING_KINDS)}"
                )
            if offer.api == "responses" and (spec.type != "chat" or kind not in RESPONSES_KINDS):
                raise ConfigError(
                    f"models.{model}.offers[{i}].api: `responses` needs a chat model's offer on a provider of kind "
                    f"{' or '.join(RESPONSES_KINDS)}; {offer.provider!r} is `{kind}`"
                    + ("" if spec.type == "chat" else f" and the model is of type `{spec.type}`")
                )
            j = listed.setdefault((offer.provider, offer.model), i)
            if j != i:  # one target, one breaker: a second listing would be attempted again, past max_retries
                raise ConfigError(
                    f"models.{model}.offers[{i}]: {offer.provider}/{offer.model} repeats offers[{j}]; "
                    "list each provider's model once in a model"
                )
            mine = (offer.input_usd_per_mtok, offer.output_usd_per_mtok, offer.supports_prefill, offer.api_in_force)
            first, theirs = facts.setdefault((offer.provider, offer.model), (f"models.{model}.offers[{i}]", mine))
            if theirs != mine:  # one upstream model is one target: one breaker, one price, one prefill answer
                raise ConfigError(
                    f"models.{model}.offers[{i}]: {offer.provider}/{offer.model} is also {first}, with other "
                    "prices, supports_prefill or api; give every offer of one provider's model the same"
                )
    _, clamps = clamp_policy(policy, raw.ceilings)
    if clamps:
        c = clamps[0]
        raise ConfigError(f"policy.{c.path}: {c.requested} is outside the allowed range (limit {c.applied})")
    _check_models("policy.fallback.models", list(policy.fallback.models), raw.models, None)
    gateway_named = ((f"policy.fallback.models[{i}]", m) for i, m in enumerate(policy.fallback.models))
    refused = naming_embedding_models(gateway_named, embedding_models(raw))
    if refused is not None:
        raise ConfigError(refused)
    seen_keys: set[str] = set()
    for org_name, org in raw.orgs.items():
        base = f"orgs.{org_name}"
        check_id(base, org_name)
        _check_scope(f"{base}.settings", org.settings, raw, policy, org)
        for provider_name, secret in org.provider_keys.items():
            if provider_name not in raw.providers:
                raise ConfigError(f"{base}.provider_keys.{provider_name}: unknown provider")
            if raw.providers[provider_name].kind in TOKEN_KINDS:
                raise ConfigError(f"{base}.provider_keys.{provider_name}: {SERVICE_ACCOUNT_ONLY}")
            check_secret(f"{base}.provider_keys.{provider_name}", secret)
            aws_rules.check_key(f"{base}.provider_keys.{provider_name}", raw.providers[provider_name].kind, secret)
        for endpoint_name, endpoint in org.custom_endpoints.items():
            epath = f"{base}.custom_endpoints.{endpoint_name}"
            if ":" in endpoint_name:  # `custom:<endpoint>:<model>` entries split on it
                raise ConfigError(f"{epath}: an endpoint id cannot contain ':'")
            check_id(epath, endpoint_name)
            check_url(f"{epath}.base_url", endpoint.base_url)
            if allow is not None:
                _check_endpoint_url(f"{epath}.base_url", endpoint.base_url, allow)
            if endpoint.api_key:
                check_secret(f"{base}.custom_endpoints.{endpoint_name}.api_key", endpoint.api_key)
            _check_sendable(epath, endpoint.auth, endpoint.headers)
        for squad_name, squad in org.squads.items():
            check_id(f"{base}.squads.{squad_name}", squad_name)
            _check_scope(f"{base}.squads.{squad_name}.settings", squad.settings, raw, policy, org)
        names: set[str] = set()
        for i, key in enumerate(org.keys):
            kpath = f"{base}.keys[{i}]"
            check_id(f"{kpath}.name", key.name)
            if key.name in names:
                raise ConfigError(f"{kpath}.name: key name {key.name!r} is used twice in this org")
            names.add(key.name)
            check_secret(f"{kpath}.key", key.key)
            if key.key in seen_keys:
                raise ConfigError(f"{kpath}.key: the same gateway key is declared twice")
            seen_keys.add(key.key)
            if key.squad is not None and key.squad not in org.squads:
                raise ConfigError(f"{kpath}.squad: unknown squad {key.squad!r}")
            _check_scope(f"{kpath}.settings", key.settings, raw, policy, org)
