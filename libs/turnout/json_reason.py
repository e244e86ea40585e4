"""Why a request body is not JSON, in words that point at the fault.

Owns: `json_reason`, the reason quoted in a 400 for a body msgspec refused
(chat, messages and count_tokens routes, the admin API). msgspec's reasons are kept, except one that
misleads: for a high surrogate escape not followed by another escape
(`"\\ud800"` in a JSON string), msgspec says "Input data was truncated".
Only called on the error path, and linear in the body (one regular
expression, no second parse).
Must not import: services, FastAPI, httpx.
"""

from __future__ import annotations

import re

import msgspec

LONE_SURROGATE = (
    "a \\uD800-\\uDBFF escape must be followed by a \\uDC00-\\uDFFF escape (a lone UTF-16 surrogate is not text)"
)

_HIGH_SURROGATE_ALONE = re.compile(rb"(?<!\\)(?:\\\\)*\\u[dD][89abAB][0-9a-fA-F]{2}(?=.)(?!\\u)", re.DOTALL)
"""A `\\uD800`-`\\uDBFF` escape (an odd run of backslashes before the `u`) followed by anything but another escape."""


def json_reason(raw: bytes, exc: msgspec.DecodeError) -> str:
    """msgspec's reason for refusing `raw`; `LONE_SURROGATE` where msgspec says "truncated" of a lone surrogate.

    RFC 8259 §8.2 leaves unpaired surrogates undefined; msgspec refuses them,
    and for a high surrogate escape followed by anything but another escape
    its reason is "Input data was truncated", though nothing was cut.
    """
    reason = str(exc)
    if reason == "Input data was truncated" and _HIGH_SURROGATE_ALONE.search(raw):
        return LONE_SURROGATE
    return reason
