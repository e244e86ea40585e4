"""The rules of `providers:` and `models:` beyond their types (SPEC §11; README "Providers").

Owns: a provider's name and base URL (http(s), no query, no credential, no
metadata address: `turnout.rules.provider_rules`), the fields each kind
takes or needs (`api_version`, `auth` and `headers`, the AWS and Google
fields), and a model's offers: a known provider of a kind that serves the
model's type and API, each provider's model listed once, with one price.
The file and an admin catalog edit go through the same rules.
Must not import: services, FastAPI, arq, httpx.
"""

from __future__ import annotations

import difflib
import re

import msgspec

from turnout.aws import config_rules as aws_rules
from turnout.config.findings import Findings
from turnout.config.providers import (
    API_VERSION_KINDS,
    API_VERSION_PATTERN,
    EMBEDDING_KINDS,
    MODELS_CALL_KINDS,
    RESPONSES_KINDS,
    SERVICE_ACCOUNT_ONLY,
    TOKEN_KINDS,
    ModelConfig,
    ProviderConfig,
    has_shared_credential,
)
from turnout.core.upstream_auth import AUTH_KINDS, ProviderAuth, Refused, auth_refusal, headers_refusals
from turnout.errors import ConfigError
from turnout.rules import provider_rules
from turnout.rules.google_fields import check_google_fields
from turnout.rules.text import check_model, check_secret, check_url, short_name


def _a(word: str) -> str:
    """The article before `word` in a message: `an azure_openai`, `a bedrock`."""
    return "an" if word[:1] in ("a", "e", "i", "o", "u") else "a"


def _check_base_url(path: str, url: str) -> None:
    """A provider's base URL: http(s) without credentials, query or fragment (each call appends its
    own path to it), of a sane length, not at a metadata address (`provider_rules.check_base_url`).

    Raises:
        ConfigError: naming `path` (the first rule it breaks).
    """
    if not re.fullmatch(r"https?://[^/?#\s@]+(?:[/?#]\S*)?", url):
        raise ConfigError(f"{path}: must be an http(s) URL without credentials")
    if "?" in url or "#" in url:  # the families append their path (and query) to it
        raise ConfigError(
            f"{path}: must not carry a query (?...) or a fragment (#...): each call "
            "appends its own path to it (a credential goes in api_key or headers, never in the URL)"
        )
    check_url(path, url)
    provider_rules.check_base_url(path, url)


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
    check_sendable(path, provider.auth, provider.headers)


def check_sendable(path: str, auth: ProviderAuth | None, headers: dict[str, str] | None) -> None:
    """`auth` and `headers` of a provider or a custom endpoint at `path` can be sent.

    Raises:
        ConfigError: the field named (`turnout.core.upstream_auth`).
    """
    refused: list[Refused] = []
    if auth is not None and (bad_auth := auth_refusal(f"{path}.auth", auth)) is not None:
        refused.append(bad_auth)
    if not refused and headers is not None:  # an unusable auth header: what the headers clash with is unknown
        refused = headers_refusals(f"{path}.headers", headers, auth)
    if refused:
        raise ConfigError("\n".join(map(str, refused)), [str(r) for r in refused])


def _check_probe(found: Findings, path: str, provider: ProviderConfig) -> None:
    """`probe`: a `models` call only where the API lists models; an active probe only with the
    operator's own credential (the fleet probes with it, never with a tenant's key)."""
    probe = provider.probe
    if isinstance(probe, msgspec.UnsetType):
        return
    if probe.call == "models" and provider.kind not in MODELS_CALL_KINDS:
        found.add(
            f"{path}.probe.call: `models` (GET /models) needs a provider of kind {', '.join(MODELS_CALL_KINDS)}; "
            f"{_a(provider.kind)} `{provider.kind}` provider is probed with `tiny_request` (a one-token request, billed)"
        )
    if probe.active and not has_shared_credential(provider):
        found.add(
            f"{path}.probe.active: the fleet probes with the provider's own credential (api_key), "
            "and this provider has none; set api_key or turn the probe off"
        )


def _check_provider(found: Findings, name: str, provider: ProviderConfig) -> None:
    """Every rule of one provider (module doc), each broken one named."""
    path = f"providers.{name}"
    found.check(check_model, f"providers.{short_name(name)}", name)  # names travel in headers (`x-turnout-provider`)
    found.check(_check_base_url, f"{path}.base_url", provider.base_url)
    if "/" in name:
        found.add(f"{path}: a provider name cannot contain '/'")
    if provider.api_key:
        found.check(check_secret, f"{path}.api_key", provider.api_key, platform=True)
    found.check(_check_api_version, path, provider)
    found.check(check_provider_auth, path, provider)
    found.check(aws_rules.check_fields, path, provider)
    found.check(
        check_google_fields,
        path,
        provider.kind,
        provider.base_url,
        project=provider.project,
        location=provider.location,
        credentials_file=provider.credentials_file,
    )
    if provider.kind in TOKEN_KINDS and provider.api_key is not None:
        found.add(f"{path}.api_key: {SERVICE_ACCOUNT_ONLY}")
    _check_probe(found, path, provider)


def check_providers(found: Findings, providers: dict[str, ProviderConfig]) -> None:
    """Every rule of every provider of `providers:`."""
    for name, provider in providers.items():
        _check_provider(found, name, provider)


Facts = tuple[float, float, bool, str]
"""What every offer of one provider's model must agree on: input and output price, prefill, API."""


def _check_offer_kind(found: Findings, path: str, spec: ModelConfig, offer_api: str, provider: str, kind: str) -> None:
    """The offer's provider serves the model's type (embeddings) and the offer's API (`responses`)."""
    if spec.type == "embedding" and kind not in EMBEDDING_KINDS:
        found.add(
            f"{path}.provider: {provider!r} is {_a(kind)} `{kind}` provider, which "
            f"serves no embeddings; an embedding model's offers need a provider of kind "
            f"{' or '.join(EMBEDDING_KINDS)}"
        )
    if offer_api == "responses" and (spec.type != "chat" or kind not in RESPONSES_KINDS):
        found.add(
            f"{path}.api: `responses` needs a chat model's offer on a provider of kind "
            f"{' or '.join(RESPONSES_KINDS)}; {provider!r} is `{kind}`"
            + ("" if spec.type == "chat" else f" and the model is of type `{spec.type}`")
        )


def _check_model(
    found: Findings,
    model: str,
    spec: ModelConfig,
    providers: dict[str, ProviderConfig],
    facts: dict[tuple[str, str], tuple[str, Facts]],
) -> None:
    """One model's id and offers; `facts`: each target's first offer in the file, across models."""
    found.check(check_model, f"models.{short_name(model)}", model)  # ids travel in headers (`x-turnout-model`)
    listed: dict[tuple[str, str], int] = {}
    for i, offer in enumerate(spec.offers):
        path = f"models.{model}.offers[{i}]"
        found.check(check_model, f"{path}.model", offer.model)
        if offer.provider not in providers:
            close = difflib.get_close_matches(offer.provider, list(providers), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            found.add(f"{path}.provider: unknown provider {offer.provider!r}{hint}")
            continue
        _check_offer_kind(found, path, spec, offer.api_in_force, offer.provider, providers[offer.provider].kind)
        target = (offer.provider, offer.model)
        j = listed.setdefault(target, i)
        if j != i:  # one target, one breaker: a second listing would be attempted again, past max_retries
            found.add(
                f"{path}: {offer.provider}/{offer.model} repeats offers[{j}]; list each provider's model once in a model"
            )
        mine = (offer.input_usd_per_mtok, offer.output_usd_per_mtok, offer.supports_prefill, offer.api_in_force)
        first, theirs = facts.setdefault(target, (path, mine))
        if theirs != mine:  # one upstream model is one target: one breaker, one price, one prefill answer
            found.add(
                f"{path}: {offer.provider}/{offer.model} is also {first}, with other "
                "prices, supports_prefill or api; give every offer of one provider's model the same"
            )


def check_models_section(found: Findings, models: dict[str, ModelConfig], providers: dict[str, ProviderConfig]) -> None:
    """Every rule of `models:` against `providers:` (module doc)."""
    facts: dict[tuple[str, str], tuple[str, Facts]] = {}
    for model, spec in models.items():
        _check_model(found, model, spec, providers, facts)
