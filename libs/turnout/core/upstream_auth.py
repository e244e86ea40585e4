"""How an OpenAI-compatible endpoint wants its key, and the extra headers it is sent.

Owns: `ProviderAuth` (the header a key goes in and the scheme before it: `authorization:
Bearer <key>` unless the provider says otherwise, e.g. `api-key: <key>` for a vLLM or a
gateway behind its own auth), the rules for a provider's extra `headers:` (names that are
HTTP tokens and not a header the gateway itself sets, values fit for a header), and
`auth_headers`, the header pairs one attempt sends. README "Providers: any OpenAI-compatible
endpoint" documents the config; RFC 9110 §5.1 (field names are tokens) and §5.5 (values
carry no CR, LF or NUL) are the sources of the checks.
Pure (the checks return the refusal, the caller raises it): the config, the catalog document,
the tenancy documents, the admin API and the adapters all use it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

import msgspec

AUTH_KINDS: Final = ("openai_compatible",)
"""Provider kinds whose `auth` and `headers` may be set (the others' families fix their own)."""
MAX_HEADERS: Final = 16
"""Most extra headers one provider or custom endpoint sends."""
MAX_HEADER_VALUE_CHARS: Final = 4096
"""Longest extra header value, in characters."""
_TOKEN: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}")
"""An HTTP field name (RFC 9110 §5.1 `token`), at most 64 characters."""
_SCHEME: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{0,32}")
"""An auth scheme (`Bearer`, `Token`, or empty: the key alone)."""
RESERVED: Final = frozenset(
    {
        "content-type",
        "content-length",
        "content-encoding",
        "transfer-encoding",
        "connection",
        "host",
        "accept",
        "accept-encoding",
        "te",
        "upgrade",
        "keep-alive",
        "proxy-authorization",
        "x-request-id",
    }
)
"""Headers the transport or the gateway sets itself (lower case): never a provider's `headers:`."""


class ProviderAuth(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Where an endpoint takes its key: `{header}: {scheme} {key}` (the key alone when `scheme` is "").

    Attributes:
        header: the header name (`authorization`, `api-key`, `x-api-key`); an HTTP token.
        scheme: the word before the key (`Bearer`, `Token`); "" sends the key alone.
    """

    header: str = "authorization"
    scheme: str = "Bearer"


DEFAULT_AUTH: Final = ProviderAuth()
"""`authorization: Bearer <key>`: what an OpenAI-compatible endpoint takes unless configured."""


class Refused(msgspec.Struct, frozen=True):
    """Why a field cannot be sent: `param` (its path: `providers.vllm.auth.header`) and `reason`."""

    param: str
    reason: str

    def __str__(self) -> str:
        return f"{self.param}: {self.reason}"


def auth_refusal(path: str, auth: ProviderAuth) -> Refused | None:
    """Why an `auth` cannot be sent, or None: `{path}.header` not an HTTP token or one the
    gateway sets itself; `{path}.scheme` not a token.

    Args:
        path: the field's path (`providers.vllm.auth`), named in the refusal.
    """
    if not _TOKEN.fullmatch(auth.header):
        return Refused(f"{path}.header", f"{auth.header!r} is not a header name (letters, digits and -, at most 64)")
    if auth.header.lower() in RESERVED:
        return Refused(f"{path}.header", f"{auth.header} is set by the gateway itself; name the header the key goes in")
    if not _SCHEME.fullmatch(auth.scheme):
        return Refused(f"{path}.scheme", f"{auth.scheme!r} is not an auth scheme (one word such as Bearer, or empty)")
    return None


def headers_refusal(path: str, headers: Mapping[str, str], auth: ProviderAuth | None) -> Refused | None:
    """The first of `headers_refusals`, or None (an API answer names one field)."""
    refused = headers_refusals(path, headers, auth)
    return refused[0] if refused else None


def headers_refusals(path: str, headers: Mapping[str, str], auth: ProviderAuth | None) -> list[Refused]:
    """Why extra headers cannot be sent, each header's first reason, in the order written; [] when
    they can: more than `MAX_HEADERS`; a name not an HTTP token, one the transport or the gateway
    sets (`RESERVED`), the key's header, or given twice; a value empty, too long, holding a
    control character (RFC 9110 §5.5) or a character outside ASCII (the HTTP client sends values
    as ASCII bytes). The value itself is never quoted (it may be a secret).

    Args:
        path: the field's path (`providers.vllm.headers`), named with the header.
        headers: name -> value (values already interpolated from `${VAR}`).
        auth: the provider's `auth` (its header is the key's: not an extra header too).
    """
    refused = [Refused(path, f"at most {MAX_HEADERS} headers")] if len(headers) > MAX_HEADERS else []
    key_header = (auth or DEFAULT_AUTH).header.lower()
    seen: set[str] = set()
    for name, value in headers.items():
        reason = _header_fault(name, value, key_header, seen)
        if reason is not None:
            refused.append(Refused(f"{path}.{name}", reason))
    return refused


def _header_fault(name: str, value: str, key_header: str, seen: set[str]) -> str | None:
    """Why one extra header cannot be sent (`headers_refusals`), or None; notes its name in `seen`."""
    if not _TOKEN.fullmatch(name):
        return "not a header name (letters, digits and -, at most 64)"
    lower = name.lower()
    if lower == key_header or lower == "authorization":
        return f"{name} carries the key, which the gateway sets itself (where it goes: use `auth`)"
    if lower in RESERVED:
        return f"{name} is set by the HTTP client or the gateway itself for every call"
    if lower in seen:
        return f"{name} is given twice (header names ignore case)"
    seen.add(lower)
    if not value or len(value) > MAX_HEADER_VALUE_CHARS:
        return f"a value of 1 to {MAX_HEADER_VALUE_CHARS} characters"
    if any(ord(c) < 0x20 and c != "\t" or ord(c) == 0x7F for c in value):
        return "the value holds a control character (CR, LF, NUL, ...)"
    if not value.isascii():
        return "the value holds a character outside ASCII (HTTP sends header values as bytes)"
    return None


def auth_headers(api_key: str, auth: ProviderAuth | None, headers: Mapping[str, str] | None) -> list[tuple[str, str]]:
    """The header pairs that carry one attempt's credential and the provider's extra headers.

    Args:
        api_key: the key ("" sends no key header at all).
        auth: where the key goes (None: `authorization: Bearer`).
        headers: extra headers (None: none), checked by `check_headers`.

    Returns:
        `[(name, value), ...]`, the key's header first.
    """
    way = auth or DEFAULT_AUTH
    out = [(way.header, f"{way.scheme} {api_key}" if way.scheme else api_key)] if api_key else []
    if headers:
        out.extend(headers.items())
    return out
