"""Tenancy: who is calling, what their org may do, and the secrets it keeps (SPEC §6).

Owns the tenancy wing, one job per module:
- `identity`: the caller's `Identity` resolved from a gateway key;
- `orgs`: the org document stored in Redis and its validation;
- `admin`: the admin API's edits of an org document, without HTTP;
- `views`: what admin reads show of an org document (secrets masked);
- `vault`: encryption at rest of provider keys;
- `byok`: from the pure credential choice to a provider to call;
- `directory`: each process's snapshot of the tenancy store, kept fresh;
- `bootstrap`: the configuration file's `orgs:` merged into the store.

The rules for what a tenant writes (ids, keys, URLs: `turnout.rules.text`)
and where its endpoints may point (`turnout.rules.ssrf`) are in the leaf
package `turnout.rules`, which the configuration reads too.
The names below are re-exported; each module is imported on first use
(PEP 562), so importing one module of the wing never loads the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from turnout import lazy_face

if TYPE_CHECKING:
    from turnout.tenancy.admin import AdminError as AdminError
    from turnout.tenancy.byok import CredentialSource as CredentialSource
    from turnout.tenancy.byok import resolve_call as resolve_call
    from turnout.tenancy.directory import TenantDirectory as TenantDirectory
    from turnout.tenancy.directory import directory_from_env as directory_from_env
    from turnout.tenancy.identity import Authenticator as Authenticator
    from turnout.tenancy.identity import Identity as Identity
    from turnout.tenancy.orgs import OrgDoc as OrgDoc
    from turnout.tenancy.orgs import hash_token as hash_token
    from turnout.tenancy.orgs import validate_org as validate_org
    from turnout.tenancy.vault import Sealed as Sealed
    from turnout.tenancy.vault import Vault as Vault

#: Public name -> the module of this package that defines it.
FACE = {
    "AdminError": "admin",
    "CredentialSource": "byok",
    "resolve_call": "byok",
    "TenantDirectory": "directory",
    "directory_from_env": "directory",
    "Authenticator": "identity",
    "Identity": "identity",
    "OrgDoc": "orgs",
    "hash_token": "orgs",
    "validate_org": "orgs",
    "Sealed": "vault",
    "Vault": "vault",
}

if not TYPE_CHECKING:
    __getattr__ = lazy_face(__name__, FACE)
