"""Argument types of the client commands (`turnout admin`, `turnout logs export`, `turnout audit export`).

Owns: `ingress_url`, `api_key` and `seconds`, each an argparse `type=` that
refuses a value the HTTP client would crash on, so a typo gets argparse's
one line naming the option (exit 2) instead of a traceback from httpx
(`InvalidURL` for `http://host:abc`, `UnicodeEncodeError` for a key with a
non-ASCII character, `ValueError` for a negative timeout).
"""

from __future__ import annotations

import argparse
import math


def ingress_url(text: str) -> str:
    """An ingress base URL: `http(s)://host[:port][/path]`, port 1-65535.

    Raises:
        argparse.ArgumentTypeError: what is wrong, quoting the value (cut to 80 characters).
    """
    import httpx

    shown = repr(text[:80])
    try:
        url = httpx.URL(text)
    except httpx.InvalidURL as exc:
        raise argparse.ArgumentTypeError(f"not a URL ({exc}); got {shown}") from None
    if url.scheme not in ("http", "https"):
        raise argparse.ArgumentTypeError(f"an ingress URL starts with http:// or https://; got {shown}")
    if not url.host:
        raise argparse.ArgumentTypeError(f"an ingress URL names a host (http://127.0.0.1:8080); got {shown}")
    if url.port is not None and not 1 <= url.port <= 65535:
        raise argparse.ArgumentTypeError(f"a port is a whole number from 1 to 65535; got {shown}")
    return text


def api_key(text: str) -> str:
    """A key sent as `Authorization: Bearer <key>`: visible ASCII, no spaces (RFC 6750 §2.1 token characters
    are a subset). The refusal never quotes the key.

    Raises:
        argparse.ArgumentTypeError: the first character that cannot travel in the header, by position.
    """
    for i, char in enumerate(text):
        if not (char.isascii() and char.isprintable() and not char.isspace()):
            raise argparse.ArgumentTypeError(
                f"a key is visible ASCII without spaces; character {i + 1} of {len(text)} is not (the key is not shown)"
            )
    return text


def seconds(text: str) -> float:
    """A positive, finite number of seconds.

    Raises:
        argparse.ArgumentTypeError: anything else, quoting the value.
    """
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"a number of seconds above 0; got {text[:40]!r}")
    return value
