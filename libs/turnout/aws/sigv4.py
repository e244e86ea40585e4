"""AWS credentials and SigV4 signing for `bedrock` providers, with botocore's public API.

Owns: the credentials of one call (a Bedrock key, `turnout.aws.keys`, or botocore's default
credential chain when the provider has none: `credentials_for`), and the signed headers of one
request (`signed_headers`, `botocore.auth.SigV4Auth` over a `botocore.awsrequest.AWSRequest`).
Must not import: httpx, `turnout.adapters`, services, FastAPI, arq. botocore is imported inside
the functions that need it, so a process with no `bedrock` provider never loads it.

The credential chain (environment variables, the shared config and credentials files, a
container or instance role) is resolved once per process, at the first call of a provider
without keys (`botocore.session.Session().get_credentials()`: the environment and files are
read at once; a role is an HTTP call to the instance metadata service, which that first call
waits for); refreshable credentials are frozen per call (`get_frozen_credentials`), which
refreshes them shortly before they expire. Signing is CPU only (an HMAC chain, tens of µs).

botocore's signer logs the canonical request at DEBUG, the session token included: its logger
is held at INFO here, so no configuration of Turnout's logging shows a secret.

Sources: https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html,
https://docs.aws.amazon.com/sdkref/latest/guide/standardized-credentials.html (the chain).
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Final

from turnout.aws.keys import split_key

if TYPE_CHECKING:
    from botocore.credentials import ReadOnlyCredentials

SERVICE: Final = "bedrock"
"""The SigV4 signing name of the Bedrock runtime (`bedrock-runtime.{region}.amazonaws.com`)."""


class NoAwsCredentials(Exception):
    """No credentials: the provider has no keys and botocore's chain found none."""


@functools.lru_cache(maxsize=1)
def default_chain() -> object | None:
    """The process's credentials from botocore's default chain, resolved once (cached: `default_chain.cache_clear()`
    forgets them); None when the chain found none."""
    from botocore.session import Session

    return Session().get_credentials()


def credentials_for(key: str) -> ReadOnlyCredentials:
    """The credentials of one call: `key` (`join_key`'s form), or the default chain when empty.

    Raises:
        NoAwsCredentials: `key` is empty and the chain found nothing.
        ValueError: `key` is not of `join_key`'s form.
    """
    from botocore.credentials import Credentials, ReadOnlyCredentials

    if key:
        keys = split_key(key)
        return ReadOnlyCredentials(keys.access_key_id, keys.secret_access_key, keys.session_token)
    found = default_chain()
    if not isinstance(found, Credentials):
        raise NoAwsCredentials("no AWS credentials: the provider has no keys and the default chain found none")
    return found.get_frozen_credentials()


def signed_headers(
    url: str, body: bytes, headers: list[tuple[str, str]], credentials: ReadOnlyCredentials, region: str
) -> list[tuple[str, str]]:
    """`headers` with SigV4's added: `X-Amz-Date`, `X-Amz-Security-Token` (with a session token)
    and `Authorization` (`AWS4-HMAC-SHA256 Credential=.../{region}/bedrock/aws4_request,
    SignedHeaders=..., Signature=...`), for a `POST` of `body` to `url`.

    Args:
        url: the full URL as it will be sent (its path already percent-encoded; signing
            encodes it once more, as SigV4 asks of every service but S3).
        body: the request body (its SHA-256 is signed).
        headers: the headers to sign (`content-type`, ...), lower-case names; the host is
            signed from `url`.
        credentials: `credentials_for`'s.
        region: the provider's region (`us-east-1`).
    """
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    request = AWSRequest(method="POST", url=url, data=body, headers=dict(headers))
    SigV4Auth(credentials, SERVICE, region).add_auth(request)
    return [(name.lower(), value) for name, value in request.headers.items()]


logging.getLogger("botocore.auth").setLevel(logging.INFO)  # module doc: its DEBUG lines hold the session token
