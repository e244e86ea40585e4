"""The simulator's OAuth2 token endpoint for Google service accounts (Vertex AI).

Owns: `POST /token`, which takes the JWT-bearer grant a service account's client sends to the
`token_uri` of its key file (`grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`,
`assertion=<a signed JWT>`, form-encoded; RFC 7523) and answers Google's
`{"access_token": "ya29.sim...", "expires_in": 3599, "token_type": "Bearer"}`, keeping the
token among those the app issued (`ISSUED`, which the Vertex AI routes accept). The JWT's
signature is not verified (the simulator has no public keys); its claims must name an issuer
(`iss`, the client email) and an audience or scope. A client email starting with the revoked
prefix (`credentials.REVOKED_PREFIX`) gets Google's 400 `invalid_grant` ("Invalid JWT
Signature."), as a deleted key does. Not logged in `/sim/log` (no attempt of a model).
Must not import: turnout's gateway packages.
Sources: https://developers.google.com/identity/protocols/oauth2/service-account#httprest,
https://datatracker.ietf.org/doc/html/rfc7523.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
from typing import Any

from aiohttp import web

from turnout_sim import credentials

GRANT_TYPE = "urn:ietf:params:oauth:grant-type:jwt-bearer"
"""The grant a service account's token request names."""
EXPIRES_IN_S = 3599
"""Lifetime of an issued token, seconds (Google's)."""
ISSUED = web.AppKey("turnout_sim_google_tokens", set[str])
"""The access tokens this app issued."""


def claims(assertion: str) -> dict[str, Any] | None:
    """The claims of a compact JWT (its middle part decoded, not verified), or None when it is not one."""
    parts = assertion.split(".")
    if len(parts) != 3:
        return None
    try:
        decoded = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, binascii.Error):
        return None
    return decoded if isinstance(decoded, dict) else None


def _refused(status: int, code: str, description: str) -> web.Response:
    return web.json_response({"error": code, "error_description": description}, status=status)


async def token(request: web.Request) -> web.Response:
    """`POST /token`: an access token for a valid JWT-bearer grant (module doc)."""
    form = await request.post()
    if form.get("grant_type") != GRANT_TYPE:
        return _refused(400, "unsupported_grant_type", "Invalid grant_type.")
    assertion = form.get("assertion")
    found = claims(assertion) if isinstance(assertion, str) else None
    if found is None or not isinstance(found.get("iss"), str) or not (found.get("aud") or found.get("scope")):
        return _refused(
            400, "invalid_grant", "Invalid JWT: Token must be a short-lived token and in a reasonable timeframe."
        )
    if credentials.revoked(found["iss"]):
        return _refused(400, "invalid_grant", "Invalid JWT Signature.")
    issued = f"ya29.sim{secrets.token_hex(16)}"
    request.app[ISSUED].add(issued)
    return web.json_response({"access_token": issued, "expires_in": EXPIRES_IN_S, "token_type": "Bearer"})
