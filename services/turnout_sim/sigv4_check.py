"""The simulator's check of a Bedrock request's SigV4 `Authorization` header.

Owns: `check`, which reads `AWS4-HMAC-SHA256 Credential={id}/{date}/{region}/bedrock/aws4_request,
SignedHeaders=..., Signature={64 hex}` and `X-Amz-Date`, refuses a missing, malformed or
mis-scoped one as AWS does (403: `UnrecognizedClientException` without a signature or for a
revoked id, `InvalidSignatureException` otherwise), and, for an access key id the simulator
knows (`credentials.AWS_TEST_KEYS`), recomputes the signature with botocore's signer over the
path as AWS canonicalises it (`canonical_url`)
(`SigV4Auth.canonical_request` / `string_to_sign` / `signature`, public methods) over the
headers the request says it signed.
Must not import: turnout's gateway packages.

Source: https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from turnout_sim import credentials

_AUTHORIZATION: Final = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<id>[A-Za-z0-9]{16,128})/(?P<date>[0-9]{8})/(?P<region>[a-z0-9-]+)/"
    r"(?P<service>[a-z0-9-]+)/aws4_request, ?SignedHeaders=(?P<signed>[a-z0-9;.-]+), ?Signature=(?P<sig>[0-9a-f]{64})"
)
_AMZ_DATE: Final = re.compile(r"[0-9]{8}T[0-9]{6}Z")
UNRECOGNIZED: Final = "The security token included in the request is invalid."
MISMATCH: Final = (
    "The request signature we calculated does not match the signature you provided. "
    "Check your AWS Secret Access Key and signing method. Consult the service documentation for details."
)


@dataclass(frozen=True, slots=True)
class Refused:
    """Why a request's signature is refused: AWS's error type and message (sent with 403)."""

    error_type: str
    message: str


@dataclass(frozen=True, slots=True)
class Signed:
    """A request that carries a well-formed signature.

    Attributes:
        access_key_id: the id it was signed with (logged as the attempt's credential).
        region: the scope's region.
    """

    access_key_id: str
    region: str


def canonical_url(url: str) -> str:
    """`url` with each path segment decoded and encoded again as the AWS SDKs encode a URI label
    (all but `A-Z a-z 0-9 - . _ ~`): what AWS signs does not depend on whether a client sent `:`
    as is or as `%3A` (SigV4 canonicalises the path it received; `%2F` stays inside its segment)."""
    parts = urlsplit(url)
    path = "/".join(quote(unquote(segment), safe="-._~") for segment in parts.path.split("/"))
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def check(method: str, url: str, headers: dict[str, str], body: bytes) -> Signed | Refused:
    """The signature of one request, checked.

    Args:
        method: the HTTP method.
        url: the URL as sent (scheme, `Host`, the raw percent-encoded path and query).
        headers: the request headers, lower-case names.
        body: the body as received.
    """
    authorization = headers.get("authorization", "")
    if not authorization:
        return Refused("UnrecognizedClientException", UNRECOGNIZED)
    m = _AUTHORIZATION.fullmatch(authorization.strip())
    amz_date = headers.get("x-amz-date", "")
    if m is None or not _AMZ_DATE.fullmatch(amz_date) or m["service"] != "bedrock" or m["date"] != amz_date[:8]:
        return Refused("InvalidSignatureException", MISMATCH)
    if m["id"].startswith(credentials.AWS_REVOKED_PREFIX):
        return Refused("UnrecognizedClientException", UNRECOGNIZED)
    signed = m["signed"].split(";")
    if "host" not in signed or any(name not in headers for name in signed):
        return Refused("InvalidSignatureException", MISMATCH)
    secret = credentials.AWS_TEST_KEYS.get(m["id"])
    if secret is not None:
        request = AWSRequest(method=method, url=canonical_url(url), data=body, headers={n: headers[n] for n in signed})
        request.context["timestamp"] = amz_date
        token = headers.get("x-amz-security-token")
        auth = SigV4Auth(Credentials(m["id"], secret, token), "bedrock", m["region"])
        expected = auth.signature(auth.string_to_sign(request, auth.canonical_request(request)), request)
        if expected != m["sig"]:
            return Refused("InvalidSignatureException", MISMATCH)
    return Signed(access_key_id=m["id"], region=m["region"])
