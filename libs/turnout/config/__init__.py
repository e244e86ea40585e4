"""Configuration file: load, interpolate, validate (SPEC §11).

Owns the configuration wing, one job per module:
- `providers`: the catalog's documents (`providers:`, `models:`) and the provider kinds;
- `documents`: the other sections' documents, the file as written (`RawConfig`)
  and a validated configuration (`Config`);
- `yaml_loader`: YAML read safely (no repeated key, no alias bomb, bounded nesting);
- `reading`: a file's text read into data, its `${...}` references kept;
- `environment`: `${NAME}` interpolation, and no reference to Turnout's own variables;
- `type_errors`: every type error of a document, each with its path;
- `findings`: the one error list of a document and its message;
- `checks`: the rules beyond the types, section by section, with
  `provider_checks`, `scope_checks` and `org_checks`;
- `loading`: the steps from a file to a `Config` (`parse_config`, `load_config`)
  and the run-time catalog's entry (`with_catalog`).

Every error of a file is reported at once, each naming its path (unknown
provider, unknown model, malformed `custom:` entry, fallback cycle, a value
over a ceiling, a provider key read from one of Turnout's own `TURNOUT_*`
variables or a provider at a cloud metadata address:
`turnout.rules.provider_rules`). Nothing half-loads: `load_config` returns
a complete `Config` or raises `ConfigError`.
The names below are the ones the rest of the code uses.
Must not import: services, FastAPI, arq, httpx.
"""

from __future__ import annotations

from turnout.config.documents import (
    BreakerConfig,
    Config,
    CustomEndpointConfig,
    EgressConfig,
    GatewayConfig,
    KeyConfig,
    OrgConfig,
    RawConfig,
    RoutingConfig,
    SquadConfig,
    embedding_models,
)
from turnout.config.loading import egress_policy, load_config, parse_config, with_catalog
from turnout.config.providers import (
    API_VERSION_KINDS,
    EMBEDDING_KINDS,
    RESPONSES_KINDS,
    SERVICE_ACCOUNT_ONLY,
    TOKEN_KINDS,
    ModelConfig,
    OfferApi,
    OfferConfig,
    ProviderConfig,
    ProviderKind,
    has_shared_credential,
)
from turnout.config.scope_checks import check_scope_settings

__all__ = [
    "API_VERSION_KINDS",
    "EMBEDDING_KINDS",
    "RESPONSES_KINDS",
    "SERVICE_ACCOUNT_ONLY",
    "TOKEN_KINDS",
    "BreakerConfig",
    "Config",
    "CustomEndpointConfig",
    "EgressConfig",
    "GatewayConfig",
    "KeyConfig",
    "ModelConfig",
    "OfferApi",
    "OfferConfig",
    "OrgConfig",
    "ProviderConfig",
    "ProviderKind",
    "RawConfig",
    "RoutingConfig",
    "SquadConfig",
    "check_scope_settings",
    "egress_policy",
    "embedding_models",
    "has_shared_credential",
    "load_config",
    "parse_config",
    "with_catalog",
]
