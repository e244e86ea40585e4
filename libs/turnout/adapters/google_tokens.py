"""OAuth2 access tokens of `vertex` providers, made from their service-account key files.

Owns: `AccessTokens`, the process's cache of one access token per service-account file (so
per provider), made and refreshed by google-auth off the event loop (`asyncio.to_thread`)
`REFRESH_MARGIN_S` before it expires, and `authorized`, which gives a call its token (or the
credential failure of its provider). google-auth is loaded on first use only
(`importlib.import_module`), so a process without a `vertex` provider never loads it (nor the
cryptography it signs with).
Must not import: services, FastAPI, arq.

The token endpoint is the file's `token_uri` (Google's `https://oauth2.googleapis.com/token`;
the simulator's in tests): google-auth signs a JWT with the file's key and exchanges it there
(the JWT-bearer grant, RFC 7523). Any failure — an unreadable or invalid file, an endpoint that
refuses or cannot be reached, no answer within the attempt's time — is a credential failure of
the provider: a 401 `authentication_error` outcome (AUTH), its message naming the failure's
class only (never the file's content or the endpoint's answer), never an exception. After a
failure the file is not tried again for `FAILURE_HOLD_S`, so an endpoint that is down is not
asked once per request.
Sources: https://google-auth.readthedocs.io/en/latest/reference/google.oauth2.service_account.html,
https://cloud.google.com/vertex-ai/docs/authentication (scope `cloud-platform`).
"""

from __future__ import annotations

import asyncio
import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any, Final

import msgspec

from turnout.adapters.base import AttemptResult, CallSpec
from turnout.core.types import Outcome

SCOPES: Final = ("https://www.googleapis.com/auth/cloud-platform",)
"""The OAuth2 scope of Vertex AI calls."""
REFRESH_MARGIN_S: Final = 300.0
"""A token is refreshed when it expires within this many seconds."""
FAILURE_HOLD_S: Final = 5.0
"""Seconds a failed file is answered with its failure before it is tried again."""


class TokenUnavailable(Exception):
    """No access token could be made; the message names the failure's class only."""


def load_credentials(credentials_file: str) -> Any:
    """google-auth's service-account credentials of `credentials_file` (blocking: reads the file).

    Raises:
        OSError, ValueError: the file cannot be read, or is no service-account key file.
    """
    service_account = importlib.import_module("google.oauth2.service_account")  # loaded on first use only
    return service_account.Credentials.from_service_account_file(credentials_file, scopes=list(SCOPES))


def refresh_credentials(credentials: Any) -> tuple[str, float]:
    """Exchange `credentials`' signed JWT at its `token_uri` (blocking: one HTTP call).

    Returns:
        (access token, expiry in epoch seconds).

    Raises:
        google.auth.exceptions.GoogleAuthError: the endpoint refused or could not be reached.
    """
    transport = importlib.import_module("google.auth.transport.requests")  # loaded on first use only
    credentials.refresh(transport.Request())
    expiry = credentials.expiry
    return str(credentials.token), expiry.replace(tzinfo=UTC).timestamp() if expiry is not None else time.time()


@dataclass
class _Held:
    credentials: Any = None
    token: str = ""
    expires_s: float = 0.0
    failed_s: float | None = None
    failure: str = ""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class AccessTokens:
    """One access token per service-account file, refreshed before it expires.

    Args:
        clock: wall clock, epoch seconds (injected by tests).
        load: reads a file into credentials (`load_credentials`; run in a thread).
        refresh: makes a token from credentials (`refresh_credentials`; run in a thread).
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        load: Callable[[str], Any] = load_credentials,
        refresh: Callable[[Any], tuple[str, float]] = refresh_credentials,
    ) -> None:
        self._clock = clock
        self._load = load
        self._refresh = refresh
        self._held: dict[str, _Held] = {}

    async def token(self, credentials_file: str) -> str:
        """The file's access token: the cached one while it has more than `REFRESH_MARGIN_S`
        left, else a fresh one (one refresh at a time per file; the others wait for it).

        Raises:
            TokenUnavailable: the file or its token endpoint failed (now, or within `FAILURE_HOLD_S`).
        """
        held = self._held.setdefault(credentials_file, _Held())
        if held.token and held.expires_s - self._clock() > REFRESH_MARGIN_S:
            return held.token
        async with held.lock:
            now_s = self._clock()
            if held.token and held.expires_s - now_s > REFRESH_MARGIN_S:
                return held.token  # refreshed while this call waited
            if held.failed_s is not None and now_s - held.failed_s < FAILURE_HOLD_S:
                raise TokenUnavailable(held.failure)
            try:
                if held.credentials is None:
                    held.credentials = await asyncio.to_thread(self._load, credentials_file)
                held.token, held.expires_s = await asyncio.to_thread(self._refresh, held.credentials)
            except Exception as exc:  # noqa: BLE001 - every failure is the provider's credential failure
                held.credentials, held.failed_s, held.failure = None, self._clock(), _failure(exc)  # re-read next time
                raise TokenUnavailable(held.failure) from None
            held.failed_s = None
            return held.token


def _failure(exc: BaseException) -> str:
    if isinstance(exc, (OSError, ValueError)) and not type(exc).__module__.startswith("google"):
        return f"the service-account key file could not be used ({type(exc).__name__})"
    return f"no access token from the service account's token endpoint ({type(exc).__name__})"


ACCESS_TOKENS: Final = AccessTokens()
"""The process's tokens (every `vertex` call's)."""


async def authorized(spec: CallSpec, tokens: AccessTokens = ACCESS_TOKENS) -> CallSpec | AttemptResult:
    """`spec` carrying its access token in `api_key` when it names a `credentials_file`
    (unchanged otherwise), or the credential failure of its provider: a 401
    `authentication_error` outcome, also when no token came within `spec.timeout_s`."""
    if spec.credentials_file is None:
        return spec
    try:
        async with asyncio.timeout(spec.timeout_s):
            token = await tokens.token(spec.credentials_file)
    except TokenUnavailable as exc:
        message = str(exc)
    except TimeoutError:
        message = f"no access token from the service account's token endpoint within {spec.timeout_s:.3f} s"
    else:
        return msgspec.structs.replace(spec, api_key=token)
    return AttemptResult(outcome=Outcome(status=401, error_type="authentication_error", message=message))
