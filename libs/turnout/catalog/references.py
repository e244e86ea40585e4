"""What still refers to a catalog model or provider: why deleting it is refused (README "Catalog").

Owns: finding, without side effects, every place a delete of the run-time
catalog would leave dangling — the places the file's rules refuse a catalog
without that model or provider (`turnout.config.with_catalog`) — and the
refusal's words. A model is named by the gateway policy's
`policy.fallback.models` and `only` and by the settings of the file's orgs, squads and
keys (`turnout.core.scopes.named_models`); a provider by the models'
offers and by the file's orgs' `provider_keys`. Orgs made through the admin
API (stored in Redis, in no file) count too (`stored`): their settings, squads,
keys and BYOK keys, so a delete never leaves such an org naming a model that
is gone (its requests would find no offer and its next settings write would
be refused). Paths are the validation's
(`orgs.demo.settings.fallbacks.demo-claude[0]`,
`models.demo-gpt.offers[1].provider`); a stored org's key is named by its
name (`orgs.acme.keys.ci-bot.settings.reroutes[0]`).
Must not import: services, FastAPI, arq, httpx, Redis.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from turnout.config import Config, ModelConfig, OrgConfig
from turnout.core.scopes import ScopeSettings, named_models
from turnout.stored.orgs import OrgDoc

MAX_LISTED = 10
"""References a refusal lists; the rest are counted (`and 3 more`)."""


def _org_scopes(orgs: Mapping[str, OrgConfig]) -> Iterator[tuple[str, ScopeSettings]]:
    """(path, settings) of every org, squad and key of the file, as the validation names them."""
    for org_name, org in orgs.items():
        yield f"orgs.{org_name}.settings", org.settings
        for squad_name, squad in org.squads.items():
            yield f"orgs.{org_name}.squads.{squad_name}.settings", squad.settings
        for i, key in enumerate(org.keys):
            yield f"orgs.{org_name}.keys[{i}].settings", key.settings


def _stored_scopes(stored: Mapping[str, OrgDoc], skip: Mapping[str, object]) -> Iterator[tuple[str, ScopeSettings]]:
    """(path, settings) of every org, squad and key stored in Redis, but the orgs of `skip` (the file's)."""
    for org_name, doc in sorted(stored.items()):
        if org_name in skip:
            continue
        yield f"orgs.{org_name}.settings", doc.settings
        for squad_name, squad in sorted(doc.squads.items()):
            yield f"orgs.{org_name}.squads.{squad_name}.settings", squad.settings
        for key_name, key in sorted(doc.keys.items()):
            yield f"orgs.{org_name}.keys.{key_name}.settings", key.settings


def model_users(config: Config, model: str, stored: Mapping[str, OrgDoc] | None = None) -> list[str]:
    """Paths of the configuration that name the catalog model `model`, in file order.

    Args:
        config: the process's configuration file (its gateway policy and
            `orgs:`; its own `models:` play no part).
        model: a catalog model id (a `custom:` entry never matches one).
        stored: the orgs stored in Redis, by id; those not in the file count too.

    Returns:
        `policy.fallback.models[i]` and `policy.fallback.only[i]` of the gateway policy, then every
        org, squad and key setting naming it (`named_models` paths under
        `orgs.<org>.settings`, `orgs.<org>.squads.<squad>.settings`,
        `orgs.<org>.keys[<i>].settings`); empty when nothing does.
    """
    fallback = config.policy.fallback
    found = [
        f"policy.fallback.{field}[{i}]"
        for field in ("models", "only")
        for i, name in enumerate(getattr(fallback, field))
        if name == model
    ]
    for path, settings in _org_scopes(config.raw.orgs):
        found += [f"{path}.{where}" for where, name in named_models(settings) if name == model]
    for path, settings in _stored_scopes(stored or {}, config.raw.orgs):
        found += [f"{path}.{where}" for where, name in named_models(settings) if name == model]
    return found


def provider_users(
    models: Mapping[str, ModelConfig],
    orgs: Mapping[str, OrgConfig],
    provider: str,
    stored: Mapping[str, OrgDoc] | None = None,
) -> list[str]:
    """Paths that name the catalog provider `provider`: models by name (as a catalog read lists them), then orgs.

    Args:
        models: the catalog's models (the run-time catalog's, not the file's).
        orgs: the configuration file's `orgs:`.
        provider: a catalog provider name.
        stored: the orgs stored in Redis, by id; those not in `orgs` count too.

    Returns:
        `models.<model>.offers[<i>].provider` of every offer on it, then
        `orgs.<org>.provider_keys.<provider>` of every org of the file
        holding a key for it; empty when nothing does.
    """
    found = [
        f"models.{name}.offers[{i}].provider"
        for name, spec in sorted(models.items())
        for i, offer in enumerate(spec.offers)
        if offer.provider == provider
    ]
    found += [f"orgs.{name}.provider_keys.{provider}" for name, org in orgs.items() if provider in org.provider_keys]
    return found + [
        f"orgs.{name}.provider_keys.{provider}"
        for name, doc in sorted((stored or {}).items())
        if name not in orgs and provider in doc.provider_keys
    ]


def still_used(kind: str, name: str, users: Sequence[str]) -> str:
    """The refusal of a delete that would leave `users` dangling, listing at most `MAX_LISTED` of them:
    "model `demo-gpt` is still used by: orgs.demo.settings.fallbacks.demo-claude[0]; remove those first".

    Args:
        kind: what is deleted (`model`, `provider`).
        name: its name.
        users: the paths that refer to it (`model_users`, `provider_users`); not empty.
    """
    listed = ", ".join(users[:MAX_LISTED])
    more = f" and {len(users) - MAX_LISTED} more" if len(users) > MAX_LISTED else ""
    return f"{kind} `{name}` is still used by: {listed}{more}; remove those first"
