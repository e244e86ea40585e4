"""The catalog admin API: models and providers edited at run time (operator key only).

Owns: the routes below, mapping HTTP onto one versioned write of the catalog
document (`turnout.state.catalog_store`). Each edit builds the whole new
catalog and validates it with the file's rules (`turnout.config.with_catalog`)
before the write, so a refused edit changes nothing (400 naming the field,
e.g. `models.m.offers[0].provider: unknown provider 'x'`; a delete of a
model or provider something still names is a 409 listing what,
`turnout.catalog.references`), and an accepted one is in force on every ingress and worker within 2 s
(`turnout.catalog.watch`). Provider keys are stored sealed or as a
reference, never shown (a read shows the source and the last characters).

    GET    /admin/v1/catalog                          the catalog in Redis and its version
    PUT    /admin/v1/catalog/models/{model}           add or replace a model (body: as in the file)
    DELETE /admin/v1/catalog/models/{model}           remove a model no policy or setting names
    PUT    /admin/v1/catalog/providers/{provider}     add or replace a provider
    DELETE /admin/v1/catalog/providers/{provider}     remove a provider no model offers and no org holds a key for
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import msgspec
from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from turnout.aws import config_rules as aws_rules
from turnout.catalog.doc import PLATFORM_ORG, doc_from_config, kind_fields, platform_key_binding, rotate_keys
from turnout.catalog.references import model_users, provider_users, still_used
from turnout.catalog.watch import CatalogWatch
from turnout.config import ModelConfig, OfferConfig, ProviderConfig, ProviderKind
from turnout.config.providers import ProbeConfig
from turnout.core.upstream_auth import ProviderAuth, headers_refusal
from turnout.errors import ConfigError, GatewayUnavailable, RequestRejected
from turnout.rules.provider_rules import key_env_refusal
from turnout.state.catalog_store import CatalogConflict
from turnout.state.errors import StateUnavailable
from turnout.stored.catalog import CatalogDoc, KeyRef, ProviderEntry
from turnout.stored.orgs import OrgDoc
from turnout.tenancy.admin import AdminError, decode, invalid, not_found
from turnout.vault import SecretUnreadable, VaultUnavailable, header_binding
from turnout_ingress.admin.access import AdminAPI, ok, rejected, seal, secret_fit
from turnout_ingress.admin.deps import Admin, Operator, body

P = "/admin/v1/catalog"

router = APIRouter()


def catalog_watch(request: Request) -> CatalogWatch:
    """The ingress's catalog watch (the catalog in Redis, its store and this process's live copy)."""
    watch: CatalogWatch = request.app.state.turnout.catalog_watch
    return watch


Watch = Annotated[CatalogWatch, Depends(catalog_watch)]


class ProviderPut(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`PUT /admin/v1/catalog/providers/{provider}`.

    `api_key` (the key itself: sealed with `TURNOUT_SECRET_KEY`, 409 without
    it) or `api_key_env` (the name of an environment variable every process
    reads, never one of Turnout's own `TURNOUT_*`: `turnout.rules.provider_rules`);
    neither keeps the provider's current key; `api_key: null` removes it.
    `api_version`: required for `azure_openai` and refused on the other kinds; `project`,
    `location`, `credentials_file` (a path on every process's disk): required for `vertex`
    and refused on the other kinds, as in the file (`turnout.config.ProviderConfig`).
    `auth` and `headers` (`openai_compatible` only, as in the file): each header value is
    sealed like a key (409 without `TURNOUT_SECRET_KEY`); `headers` left out keeps the
    provider's current ones, `null` removes them.
    `region` (required for `bedrock`) and a `bedrock` provider's keys: `access_key_id` and
    `secret_access_key` (with `session_token` if any), sealed together as its key
    (`turnout.aws.keys`), or that key itself in `api_key` (`ACCESS_KEY_ID:SECRET_ACCESS_KEY`);
    no key at all: botocore's credential chain of each process.
    `probe`: the provider's active probe (`turnout.config.ProbeConfig`, README "Active
    probes"); left out keeps the current one, `null` removes it.
    """

    kind: ProviderKind
    base_url: str
    api_version: str | None = None
    project: str | None = None
    location: str | None = None
    credentials_file: str | None = None
    api_key: str | None | msgspec.UnsetType = msgspec.UNSET
    api_key_env: str | msgspec.UnsetType = msgspec.UNSET
    auth: ProviderAuth | None = None
    headers: dict[str, str] | None | msgspec.UnsetType = msgspec.UNSET
    # bedrock (turnout.aws.config_rules)
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None
    probe: ProbeConfig | None | msgspec.UnsetType = msgspec.UNSET


def catalog_view(doc: CatalogDoc, version: int) -> dict[str, Any]:
    """An admin read of the catalog: providers with their key's source only, never the key."""
    return {
        "version": version,
        "origin": doc.origin,
        "providers": {
            name: {
                "kind": p.kind,
                "base_url": p.base_url,
                "api_key": p.key.view() if p.key is not None else None,
                **kind_fields(p),
                **({"auth": msgspec.to_builtins(p.auth)} if p.auth is not None else {}),
                **({"headers": {h: ref.view() for h, ref in p.headers.items()}} if p.headers is not None else {}),
            }
            for name, p in sorted(doc.providers.items())
        },
        "models": {name: msgspec.to_builtins(m) for name, m in sorted(doc.models.items())},
    }


def _key_ref(api: AdminAPI, name: str, spec: ProviderPut, current: ProviderEntry | None) -> KeyRef | None:
    if not isinstance(spec.api_key_env, msgspec.UnsetType):
        if not isinstance(spec.api_key, msgspec.UnsetType):
            raise rejected(invalid("api_key_env", "give `api_key` or `api_key_env`, not both"))
        reason = key_env_refusal(spec.api_key_env)
        if reason is not None:
            raise rejected(invalid("api_key_env", reason))
        return KeyRef(source="env", name=spec.api_key_env)
    if isinstance(spec.api_key, msgspec.UnsetType):
        return current.key if current is not None else None
    if spec.api_key is None:
        return None
    if not spec.api_key.strip():  # an empty read of stdin must not pass as "stored" while removing the key
        raise rejected(invalid("api_key", "must not be empty (send `null` to remove the provider's key)"))
    secret_fit("api_key", spec.api_key)
    return KeyRef(source="sealed", sealed=seal(api, spec.api_key, platform_key_binding(name)))


def _probe_after(spec: ProviderPut, current: ProviderEntry | None) -> ProbeConfig | None:
    """The provider's active probe after the edit: kept (left out), removed (`null`) or `spec`'s."""
    if isinstance(spec.probe, msgspec.UnsetType):
        return current.probe if current is not None else None
    return spec.probe


def _header_refs(
    api: AdminAPI, name: str, spec: ProviderPut, current: ProviderEntry | None
) -> dict[str, KeyRef] | None:
    """The provider's extra headers after the edit: kept (left out), removed (`null`), or each
    value sealed to the provider and the header (`header_binding`)."""
    if isinstance(spec.headers, msgspec.UnsetType):
        return current.headers if current is not None else None
    if spec.headers is None:
        return None
    refused = headers_refusal(f"providers.{name}.headers", spec.headers, spec.auth)
    if refused is not None:  # checked before sealing: the stored catalog holds no value it would not send
        raise rejected(invalid(refused.param, refused.reason))
    refs: dict[str, KeyRef] = {}
    for header, value in spec.headers.items():
        binding = header_binding(PLATFORM_ORG, name, header, endpoint=False)
        refs[header] = KeyRef(source="sealed", sealed=seal(api, value, binding))
    return refs


def _with_aws_key(name: str, spec: ProviderPut) -> ProviderPut:
    """`spec` with a `bedrock` provider's key fields sealed as one key: its `api_key` becomes their
    Bedrock key (`turnout.aws.config_rules.folded_key`, the pairing rules named by their path)."""
    if spec.access_key_id is None and spec.secret_access_key is None and spec.session_token is None:
        return spec
    if spec.kind != aws_rules.KIND:
        field = next(f for f in aws_rules.FIELDS[1:] if getattr(spec, f) is not None)
        raise rejected(invalid(field, f"only a `bedrock` provider takes a {field}, this one is `{spec.kind}`"))
    if not isinstance(spec.api_key, msgspec.UnsetType) or not isinstance(spec.api_key_env, msgspec.UnsetType):
        raise rejected(invalid("api_key", "give access_key_id and secret_access_key, or api_key, not both"))
    fields = ProviderConfig(
        kind=spec.kind,
        base_url=spec.base_url,
        region=spec.region,
        access_key_id=spec.access_key_id,
        secret_access_key=spec.secret_access_key,
        session_token=spec.session_token,
    )
    try:
        key = aws_rules.folded_key(f"providers.{name}", fields)
    except ConfigError as exc:
        raise AdminError(400, str(exc), code="invalid_value", param=str(exc).split(":", 1)[0]) from None
    return msgspec.structs.replace(spec, api_key=key, access_key_id=None, secret_access_key=None, session_token=None)


async def write(watch: CatalogWatch, edit: Callable[[CatalogDoc], CatalogDoc]) -> Response:
    """One versioned write of the whole catalog, validated first (the caller checked the operator key)."""

    def mutate(current: CatalogDoc | None) -> tuple[CatalogDoc | None, None]:
        new = edit(current if current is not None else doc_from_config(watch.file, watch.vault))
        try:
            watch.config_of(new)
        except ConfigError as exc:
            raise AdminError(400, str(exc), code="invalid_value", param=str(exc).split(":", 1)[0]) from None
        return msgspec.structs.replace(new, origin="api"), None

    try:
        doc, _, version = await watch.store.update(mutate)
    except AdminError as exc:
        raise rejected(exc) from None
    except (StateUnavailable, CatalogConflict) as exc:
        raise _unavailable() from exc
    try:
        await watch.refresh()  # read-your-writes on this ingress; the others follow within the bound
    except StateUnavailable:
        pass
    assert doc is not None
    return ok(catalog_view(doc, version or watch.live.version))


@router.get(P)
async def get_catalog(watch: Watch, _: Operator) -> Response:
    """The catalog in Redis and its version (404 before it is seeded)."""
    try:
        doc, version = await watch.store.load()
    except StateUnavailable as exc:
        raise _unavailable() from exc
    if doc is None:
        raise rejected(not_found())
    return ok(catalog_view(doc, version))


@router.put(P + "/models/{model:path}")  # a model id may hold `/` (`org/model`)
async def put_model(request: Request, model: str, watch: Watch, _: Operator) -> Response:
    """Add or replace a model (the body as in the file); its offers' prices, `supports_prefill` and `api`
    carry over to every other model's offer of the same provider model (`carried`)."""
    spec = decode(await body(request), ModelConfig, f"models.{model}")
    return await write(
        watch, lambda doc: msgspec.structs.replace(doc, models=carried({**doc.models, model: spec}, model))
    )


def carried(models: dict[str, ModelConfig], written: str) -> dict[str, ModelConfig]:
    """`models` with the prices, `supports_prefill` and `api` of `written`'s offers set on every other
    model's offer of the same provider and upstream model: one provider's model is one target,
    with one price (`turnout.config`), so a write that reprices it reprices it everywhere."""
    facts = {(o.provider, o.model): o for o in models[written].offers}

    def repriced(o: OfferConfig) -> OfferConfig:
        f = facts.get((o.provider, o.model))
        if f is None:
            return o
        return msgspec.structs.replace(
            o,
            input_usd_per_mtok=f.input_usd_per_mtok,
            output_usd_per_mtok=f.output_usd_per_mtok,
            supports_prefill=f.supports_prefill,
            api=f.api,
        )

    out: dict[str, ModelConfig] = {}
    for name, spec in models.items():
        out[name] = (
            spec if name == written else msgspec.structs.replace(spec, offers=[repriced(o) for o in spec.offers])
        )
    return out


@router.delete(P + "/models/{model:path}")
async def delete_model(model: str, api: Admin, watch: Watch, _: Operator) -> Response:
    """Remove a model (404 when absent; 409 listing them while the file's policy or any org names it)."""
    users = model_users(watch.file, model, await _stored_orgs(api))
    return await write(watch, lambda doc: _without(doc, "models", "model", model, users))


@router.put(P + "/providers/{provider}")
async def put_provider(request: Request, provider: str, api: Admin, watch: Watch, _: Operator) -> Response:
    """Add or replace a provider, its key sealed or a reference (`ProviderPut`)."""
    spec = _with_aws_key(provider, decode(await body(request), ProviderPut, f"providers.{provider}"))

    def edit(doc: CatalogDoc) -> CatalogDoc:
        entry = ProviderEntry(
            kind=spec.kind,
            base_url=spec.base_url,
            key=_key_ref(api, provider, spec, doc.providers.get(provider)),
            api_version=spec.api_version,
            auth=spec.auth,
            headers=_header_refs(api, provider, spec, doc.providers.get(provider)),
            region=spec.region,
            project=spec.project,
            location=spec.location,
            credentials_file=spec.credentials_file,
            probe=_probe_after(spec, doc.providers.get(provider)),
        )
        return msgspec.structs.replace(doc, providers={**doc.providers, provider: entry})

    return await write(watch, edit)


@router.delete(P + "/providers/{provider}")
async def delete_provider(provider: str, api: Admin, watch: Watch, _: Operator) -> Response:
    """Remove a provider (404 when absent; 409 listing them while offers or any org's keys use it)."""
    stored = await _stored_orgs(api)
    return await write(
        watch,
        lambda doc: _without(
            doc, "providers", "provider", provider, provider_users(doc.models, watch.file.raw.orgs, provider, stored)
        ),
    )


async def _stored_orgs(api: AdminAPI) -> dict[str, OrgDoc]:
    """Every org stored in Redis, by id (a delete's references; `turnout.catalog.references`).

    Raises:
        GatewayUnavailable: Redis unreachable (503; nothing deleted).
    """
    try:
        loaded = await api.store.load_many(list(await api.store.org_versions()))
    except StateUnavailable as exc:
        raise _unavailable() from exc
    return {org: doc for org, (doc, _) in loaded.items()}


def _without(doc: CatalogDoc, field: str, what: str, name: str, users: list[str]) -> CatalogDoc:
    """`doc` without `name` in its `models` or `providers`.

    Raises:
        AdminError: 404 naming `what` when absent; 409 `conflict` listing
            `users` (the paths that still name it; `param` the first) when any.
    """
    entries: dict[str, Any] = getattr(doc, field)
    if name not in entries:
        raise AdminError(404, f"no {what} {name!r} in the catalog", code="not_found", param=what)
    if users:
        raise AdminError(409, still_used(what, name, users), code="conflict", param=users[0])
    return msgspec.structs.replace(doc, **{field: {k: v for k, v in entries.items() if k != name}})


async def rotated(watch: CatalogWatch) -> int:
    """Re-seal every sealed provider key of the catalog under the newest `TURNOUT_SECRET_KEY`; how many.

    Raises:
        RequestRejected: 409 when a key does not open (nothing written).
        GatewayUnavailable: 503 when the write failed (nothing written).
    """
    try:
        _, count, version = await watch.store.update(
            lambda doc: rotate_keys(doc, watch.vault) if doc is not None else (None, 0)
        )
    except (VaultUnavailable, SecretUnreadable) as exc:
        raise RequestRejected(
            409, f"catalog: {exc}", error_type="conflict_error", code="secret_key_unavailable"
        ) from None
    except (StateUnavailable, CatalogConflict) as exc:
        raise _unavailable() from exc
    if version is not None:
        await watch.refresh()
    return count


def _unavailable() -> GatewayUnavailable:
    return GatewayUnavailable(
        "The catalog store is unreachable right now; retry shortly.", retry_after_s=1, code="redis_unavailable"
    )
