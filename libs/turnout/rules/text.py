"""Write-time rules for tenant strings that reach a header, a URL or a log line.

Owns: what an id, a model name, an API key and an endpoint URL written by a
tenant (admin API) or the operator (configuration file) may contain, and
the refusal naming the path. Model names become `x-turnout-model`, ids
become part of `x-turnout-provider` (`custom:<org>:<id>`), keys become an
`Authorization` header, and all of them reach logs and records: a CR, LF or
NUL in any of them would split a header or a log line, so every one is
checked when it is written, never at request time.
Must not import: services, FastAPI, arq, httpx.

Rules (violations raise `ConfigError("<path>: <why>")`; the value itself is
never quoted, since it may be a secret):
- ids (orgs, squads, keys, custom endpoints): 1–`MAX_ID_CHARS` printable
  ASCII characters, no spaces (what the file may declare); the admin API
  creates them under a narrower rule, `A-Z a-z 0-9 . _ -` starting with a
  letter or digit (`turnout.tenancy.admin.check_name`; README "Admin API"
  lists the rule of every kind of string);
- API keys (BYOK, custom endpoint, gateway keys from the file):
  1–`MAX_SECRET_CHARS` printable ASCII characters, no spaces; the
  operator's platform keys: no control characters;
- model and provider names (catalog ids, offers' upstream models, models in
  settings, `custom:<endpoint>:<model>` entries): 1–`MAX_MODEL_CHARS`
  printable ASCII characters without spaces, since they travel in headers;
- endpoint URLs: at most `MAX_URL_CHARS` printable ASCII characters (their
  other rules are `turnout.rules.ssrf.check_base_url`).
"""

from __future__ import annotations

import re

from turnout.errors import ConfigError

MAX_ID_CHARS = 64
MAX_MODEL_CHARS = 256
MAX_SECRET_CHARS = 4096
MAX_URL_CHARS = 2048

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_VISIBLE = re.compile(r"[\x21-\x7e]+")


def refusal(value: str, *, max_chars: int, visible_ascii: bool) -> str | None:
    """Why `value` may not be stored, or None.

    Args:
        value: the string as written.
        max_chars: the longest allowed length, in characters.
        visible_ascii: also require printable ASCII without spaces
            (`!`..`~`), as a header value or an id in one needs.
    """
    if not value:
        return "must not be empty"
    if len(value) > max_chars:
        return f"is too long ({len(value)} characters; at most {max_chars})"
    if _CONTROL.search(value):
        return "contains a control character (CR, LF, NUL, ...)"
    if visible_ascii and not _VISIBLE.fullmatch(value):
        return "must be printable ASCII without spaces"
    return None


def short_name(value: str, limit: int = 40) -> str:
    """`value` quoted for an error path, cut to `limit` characters (with its length) so a
    refusal never echoes an over-long or unprintable name in full."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}… ({len(value)} characters)"


def _check(path: str, value: str, *, max_chars: int, visible_ascii: bool) -> None:
    reason = refusal(value, max_chars=max_chars, visible_ascii=visible_ascii)
    if reason is not None:
        raise ConfigError(f"{path}: {reason}")


def check_id(path: str, value: str) -> None:
    """Refuse an id unfit for a header or a log line (`ConfigError` naming `path`)."""
    _check(path, value, max_chars=MAX_ID_CHARS, visible_ascii=True)


def check_secret(path: str, value: str, *, platform: bool = False) -> None:
    """Refuse an API key unfit for an `Authorization` header (`ConfigError` naming `path`, not the key).

    Args:
        platform: the operator's own provider key (`providers.*.api_key`):
            only length and control characters are checked.
    """
    _check(path, value, max_chars=MAX_SECRET_CHARS, visible_ascii=not platform)


def check_model(path: str, value: str) -> None:
    """Refuse a model or provider name unfit for a header (`ConfigError` naming `path`):
    printable ASCII without spaces, as `x-turnout-model` / `x-turnout-provider` carry it."""
    _check(path, value, max_chars=MAX_MODEL_CHARS, visible_ascii=True)


def check_url(path: str, value: str) -> None:
    """Refuse an endpoint URL too long or carrying control characters (`ConfigError` naming `path`)."""
    _check(path, value, max_chars=MAX_URL_CHARS, visible_ascii=True)
