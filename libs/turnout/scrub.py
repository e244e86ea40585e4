"""The egress scrubber: the one function every upstream string passes before any sink.

Owns: turning a text that came from an upstream or a transport error (an
error message, code or type, a mid-stream error event) into one fit for the
client, attempt records, the breaker's `last_error`, logs, spans and
exports; and the narrower credential redaction that logs and spans apply to
everything they carry. Nothing else in Turnout edits such texts.
Must not import: services, FastAPI, arq, httpx.

`Scrubber.text` (tenant-facing texts) keeps only what is allowed:
- printable characters: control characters (CR, LF, NUL, C1, U+2028/9)
  become spaces, runs of blanks one space;
- at most `MAX_TEXT_CHARS` characters;
- no HTML: a body that looks like a page becomes "upstream returned an HTML
  page (status 502)";
- no credential (`credentials`, below);
- no provider internals: IPv4 / IPv6 addresses become `[address]`, the port
  after a host name or address is dropped.
`Scrubber.code` keeps a provider's error `code` / `type` only as its leading
identifier (`[A-Za-z0-9_.-]`, at most 64 characters), so a code such as
`invalid_api_key:sk-…` stays `invalid_api_key` and still classifies.

`Scrubber.credentials` (logs, span attributes) removes:
- every credential the fleet knows (platform provider keys, tenants' BYOK
  and custom endpoint keys, gateway keys from the file, the operator key,
  the clear lookup prefix of every gateway key), in full and as any
  fragment of `FRAGMENT_CHARS` (8) characters or more: a text run covered
  by 8-character windows of known secrets becomes `[redacted]`. The
  fragments are kept as salted 64-bit hashes (Python's per-process `hash`),
  never as text; a secret shorter than 8 characters cannot be told apart
  from a word and is not looked for (gateway keys need 8 or more);
- credentials by shape, known or not: `Bearer`/`Basic` tokens,
  `name=value` / `name: value` for credential-like names (`api_key`,
  `token`, `secret`, `password`, `sig`, ...), the text after
  "API key provided:", well-known key formats (`sk-…`, `AIza…`, `gsk_…`,
  `xai-…`, `tk-…`, `hf_…`, `AKIA…`, JWTs), and any run of 32+ URL-safe
  characters mixing upper case, lower case and digits (base64 material);
- in URLs and request paths (`GET /v1/models?api_key=… HTTP/1.1`): the
  userinfo and the whole query string (`?[redacted]`).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence

import msgspec

from turnout.core.types import Outcome

FRAGMENT_CHARS = 8
"""Shortest fragment of a known secret that is recognised (and the window size)."""
MAX_TEXT_CHARS = 300
"""Longest tenant-facing text kept; longer ones are cut and end with `…`."""
REDACTED = "[redacted]"
ADDRESS = "[address]"

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
_BLANKS = re.compile(r"[ \t]{2,}")
_HTML = re.compile(r"<\s*(?:!doctype|html|head|body|title|h1|center|div|pre|script|style)\b", re.IGNORECASE)
_CODE = re.compile(r"[A-Za-z0-9_.\-]{1,64}")

_SCHEME_TOKEN = re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=\-*]{4,}")
_NAMED = re.compile(
    r"(?i)(\b(?:x-)?(?:api[\s_-]?key|apikey|access[_-]?token|auth[_-]?token|refresh[_-]?token|token|secret"
    r"|client[_-]?secret|password|passwd|credential|authorization|signature|sig)s?"
    r"(?:\s+provided)?[\"']?\s*[:=]\s*[\"']?)"
    r"(?!\[redacted\])[^\s\"',;&}\]]+"
)
_KEY_PARAM = re.compile(r"(?i)([?&;\s](?:key|code)=)[^\s\"',;&}]+")
_SHAPES = re.compile(
    r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-*]{8,}"
    r"|\bAIza[0-9A-Za-z_\-]{20,}"
    r"|\b(?:gsk|hf|ghp|gho|github_pat|xoxb|xoxp)_[A-Za-z0-9_]{16,}"
    r"|\bxai-[A-Za-z0-9_\-]{16,}"
    r"|\btk-[A-Za-z0-9_\-]{8,}"
    r"|\bAKIA[0-9A-Z]{16}\b"
    r"|\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"
)
_LONG_TOKEN = re.compile(r"[A-Za-z0-9_\-+/=]{32,}")
_URL = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)([^\s/?#\"'<>]*@)?([^\s/?#\"'<>]*)([^\s?#\"'<>]*)(\?[^\s#\"'<>]*)?")
_PATH_QUERY = re.compile(r"((?:^|[\s\"'(])/[^\s?#\"'<>]*)\?[^\s#\"'<>]*")
_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?::\d{1,5})?(?![\w.])")
_IPV6 = re.compile(r"\[?(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f.]{0,15}(?![\w:])\]?(?::\d{1,5})?")
_HOST_PORT = re.compile(r"(?i)\b((?:[a-z0-9](?:[a-z0-9\-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}|localhost):\d{1,5}\b")


def _grams(secret: str) -> Iterable[int]:
    """Salted hashes of every `FRAGMENT_CHARS`-character window of `secret`."""
    n = FRAGMENT_CHARS
    return (hash(secret[i : i + n]) for i in range(len(secret) - n + 1))


def _mask_known(text: str, grams: frozenset[int], extra: frozenset[int] = frozenset()) -> str:
    """`text` with every run covered by windows of known secrets (`grams` or `extra`) replaced by `[redacted]`."""
    n = FRAGMENT_CHARS
    if not (grams or extra) or len(text) < n:
        return text
    runs: list[tuple[int, int]] = []
    for i in range(len(text) - n + 1):
        h = hash(text[i : i + n])
        if h in grams or h in extra:
            if runs and i <= runs[-1][1]:
                runs[-1] = (runs[-1][0], i + n)
            else:
                runs.append((i, i + n))
    if not runs:
        return text
    out, at = [], 0
    for start, end in runs:
        out += [text[at:start], REDACTED]
        at = end
    out.append(text[at:])
    return "".join(out)


def _long_token(match: re.Match[str]) -> str:
    token = match.group(0)
    mixed = any(c.isupper() for c in token) and any(c.islower() for c in token) and any(c.isdigit() for c in token)
    return REDACTED if mixed else token


def _url(match: re.Match[str]) -> str:
    scheme, _userinfo, host, path, query = match.groups()
    return f"{scheme}{host}{path}{'?' + REDACTED if query else ''}"


def redact_shapes(text: str) -> str:
    """`text` without credentials recognisable by their shape or name, and without URL queries
    and userinfo (no known secrets needed; see the module doc)."""
    if not text:
        return text
    text = _URL.sub(_url, text)
    text = _PATH_QUERY.sub(lambda m: f"{m.group(1)}?{REDACTED}", text)
    text = _SCHEME_TOKEN.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _NAMED.sub(lambda m: m.group(1) + REDACTED, text)
    text = _KEY_PARAM.sub(lambda m: m.group(1) + REDACTED, text)
    text = _SHAPES.sub(REDACTED, text)
    return _LONG_TOKEN.sub(_long_token, text)


def _ipv6(match: re.Match[str]) -> str:
    candidate = match.group(0)
    core = candidate.strip("[]").split("]")[0]
    try:
        ipaddress.IPv6Address(core)
    except ValueError:
        return candidate
    return ADDRESS


def strip_internals(text: str) -> str:
    """`text` without IP addresses (`[address]`) and without the port after a host name."""
    text = _IPV4.sub(ADDRESS, text)
    text = _IPV6.sub(_ipv6, text)
    return _HOST_PORT.sub(lambda m: m.group(1), text)


class Scrubber:
    """The fleet's scrubber: knows every credential of the process (see the module doc).

    One per process, built at startup and handed to the router, the relay,
    the log handler and the span exporters; the tenant directory tells it
    the tenants' secrets after each refresh (`know`).

    Args:
        secrets: credentials known at start (platform keys, file gateway
            keys, the operator key), as group `static`.
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._groups: dict[str, frozenset[int]] = {}
        self._grams: frozenset[int] = frozenset()
        self.know("static", secrets)

    def know(self, group: str, secrets: Iterable[str]) -> None:
        """Replace the credentials of `group` (`static`, `org:<id>`, ...) with `secrets`.

        Secrets shorter than `FRAGMENT_CHARS` characters are ignored.
        """
        self.update({group: secrets})

    def update(self, known: Mapping[str, Iterable[str]], forgotten: Iterable[str] = ()) -> None:
        """Replace the credentials of every group in `known` and drop the groups in `forgotten`."""
        for group in forgotten:
            self._groups.pop(group, None)
        for group, secrets in known.items():
            self._groups[group] = frozenset(g for s in secrets if s and len(s) >= FRAGMENT_CHARS for g in _grams(s))
        self._grams = frozenset().union(*self._groups.values())

    def credentials(self, text: str, extra: Sequence[str] = ()) -> str:
        """`text` without any credential, known or by shape, and without URL queries.

        Args:
            text: any text bound for a log line, a span attribute or a sink.
            extra: credentials to remove besides the known ones (the key
                an attempt just sent, not yet told to `know`).
        """
        if not text:
            return text
        more = frozenset(g for s in extra if len(s) >= FRAGMENT_CHARS for g in _grams(s))
        return redact_shapes(_mask_known(text, self._grams, more))

    def text(self, text: str, *, status: int | None = None, extra: Sequence[str] = ()) -> str:
        """A text from an upstream or a transport error, as any sink may hold it (module doc).

        Args:
            text: the raw text (a provider's message, an SSE error event's
                message, a transport error's description).
            status: the HTTP status it came with, for the HTML summary.
            extra: credentials to remove besides the known ones.

        Returns:
            The scrubbed text, at most `MAX_TEXT_CHARS` characters; "" for "".
        """
        if not text:
            return text
        if _HTML.search(text):
            return "upstream returned an HTML page" + (f" (status {status})" if status is not None else "")
        text = _CONTROL.sub(" ", text)
        text = strip_internals(self.credentials(text, extra))
        text = _BLANKS.sub(" ", text).strip()
        return text if len(text) <= MAX_TEXT_CHARS else text[: MAX_TEXT_CHARS - 1] + "…"

    def code(self, value: str | None, extra: Sequence[str] = ()) -> str | None:
        """A provider's error `code` or `type` as its leading identifier; None when nothing is left."""
        if not value:
            return value
        match = _CODE.match(self.credentials(value, extra))
        return match.group(0) if match else None

    def outcome(self, outcome: Outcome, extra: Sequence[str] = ()) -> Outcome:
        """`outcome` with its message, code and type scrubbed (the same object when nothing changed)."""
        message = self.text(outcome.message, status=outcome.status, extra=extra)
        code = self.code(outcome.error_code, extra)
        etype = self.code(outcome.error_type, extra)
        if message == outcome.message and code == outcome.error_code and etype == outcome.error_type:
            return outcome
        return msgspec.structs.replace(outcome, message=message, error_code=code, error_type=etype)
