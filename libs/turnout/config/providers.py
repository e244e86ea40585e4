"""The catalog's documents: providers, their kinds, and the models and offers served through them (SPEC §11).

Owns: `providers:` and `models:` of `turnout.yaml` as msgspec types
(`ProviderConfig`, `ModelConfig`, `OfferConfig`), the provider kinds and what
each kind serves, and the facts read off them (`has_shared_credential`).
The rules beyond the types are in `turnout.config.provider_checks`.
Must not import: services, FastAPI, arq, httpx, other `turnout.config` modules.
"""

from __future__ import annotations

import re
from typing import Annotated, Final, Literal

import msgspec

from turnout.aws import config_rules as aws_rules
from turnout.core.alternates import CLASS_PATTERN
from turnout.core.model_types import ModelType
from turnout.core.ordering import OrderName
from turnout.core.upstream_auth import ProviderAuth

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

ProbeCall = Literal["models", "tiny_request"]
"""An active probe's call (`ProbeConfig.call`): `models` is `GET /models` (OpenAI's and Azure
OpenAI's list of models: no tokens, not billed), `tiny_request` a chat request for one token
of the offer's model (billed as such a request: its prompt and one output token)."""
MODELS_CALL_KINDS: tuple[ProviderKind, ...] = ("openai", "openai_compatible", "azure_openai")
"""The provider kinds whose API lists models (`GET {base_url}/models`; Azure's `/openai/models`)."""


class ProbeConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A provider's active probe (issue #41 item 6; README "Active probes").

    Attributes:
        active: the fleet probes this provider's open targets on its own, without waiting
            for client traffic (off unless turned on).
        interval_s: seconds between two probes of one target (`turnout.core.active_probe`).
        call: what a probe sends (`ProbeCall`); None: `models` for `MODELS_CALL_KINDS`,
            else `tiny_request` (`call_for`).
    """

    active: bool = False
    interval_s: Annotated[
        float, msgspec.Meta(ge=0.5, le=3600, description="seconds between two probes, 0.5 to 3600")
    ] = 5.0
    call: ProbeCall | None = None

    def call_for(self, kind: ProviderKind) -> ProbeCall:
        """The call a probe of a provider of `kind` sends."""
        if self.call is not None:
            return self.call
        return "models" if kind in MODELS_CALL_KINDS else "tiny_request"


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
            (`turnout.rules.google_fields`, README "Providers: Vertex AI").
        probe: the provider's active probe (`ProbeConfig`); unset: none. Held as UNSET, never
            encoded, so a stored catalog without probes stays what earlier versions wrote.
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
    # vertex (turnout.rules.google_fields)
    project: str | None = None
    location: str | None = None
    credentials_file: str | None = None
    probe: ProbeConfig | msgspec.UnsetType = msgspec.UNSET

    @property
    def active_probe(self) -> ProbeConfig | None:
        """The provider's active probe when it is turned on, else None."""
        return self.probe if isinstance(self.probe, ProbeConfig) and self.probe.active else None

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
        klass: its comparability class, written `class:` (`frontier-chat`; a name of
            `turnout.core.alternates.CLASS_PATTERN`): the models a policy with
            `fallback.comparable: true` may append as comparable alternates of each other (README
            "Comparable alternates"); chat models only. Unset (the default) is never encoded, so a
            stored catalog without classes stays byte for byte what versions before the field wrote
            (its file digest included); read it as `comparability_class`.
    """

    offers: Annotated[list[OfferConfig], msgspec.Meta(min_length=1, description="a model needs at least one offer")]
    context_window: ContextWindow | None = None
    order: OrderName = "health"
    type: ModelType = "chat"
    klass: Annotated[str, msgspec.Meta(pattern=CLASS_PATTERN)] | msgspec.UnsetType = msgspec.field(
        default=msgspec.UNSET, name="class"
    )

    @property
    def comparability_class(self) -> str | None:
        """Its `class:`, or None when it declares none."""
        return None if isinstance(self.klass, msgspec.UnsetType) else self.klass
