"""Same family, same bytes: what a request carries to be sent upstream as its client sent it (SPEC §13).

Owns: `Native`, the client's own request (its surface, body and provider headers)
carried beside the internal OpenAI chat request from the ingress to the attempt;
the client headers each surface passes to a provider of its own family
(`PASSED_HEADERS`, `passed_headers`); and the one rewrite an attempt makes to the
client's body (`native_body`: the target's model in, the gateway's `provider`
routing preferences out). Pure: stdlib and msgspec only.

A surface is what a client sends (`messages`: Anthropic Messages; `chat`: OpenAI
Chat Completions); a family speaks one surface natively
(`turnout.adapters.base.ApiFamily.native_surface`). An attempt on a target whose
family speaks the carry's surface sends `native_body` with the passed headers and
answers in that surface's shape; any other target gets the internal OpenAI
request, translated by its family as before, or is skipped when the client's
request could not be translated (`Native.crossing`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Final

import msgspec

_decode = msgspec.json.Decoder()
_encode = msgspec.json.Encoder()

CHAT: Final = "chat"
"""The OpenAI Chat Completions surface (`POST /v1/chat/completions`): the internal request's own shape."""
MESSAGES: Final = "messages"
"""The Anthropic Messages surface (`POST /v1/messages`)."""
RESPONSES: Final = "responses"
"""The OpenAI Responses surface (`POST /v1/responses`), spoken natively by `api: responses` offers."""

PASSED_HEADERS: Final[Mapping[str, frozenset[str]]] = MappingProxyType(
    {
        MESSAGES: frozenset({"anthropic-version", "anthropic-beta"}),
        RESPONSES: frozenset({"openai-beta"}),
        CHAT: frozenset({"openai-beta"}),
    }
)
"""Surface -> the client headers (lower-case names) that reach a provider of the same family, values as sent.
Sources: https://docs.anthropic.com/en/api/versioning and /en/api/beta-headers; OpenAI's `OpenAI-Beta`
header (https://platform.openai.com/docs/api-reference/responses). A chat carry (`CHAT`) exists only for
these headers: its body is the OpenAI request already, sent as on any chat request."""


class Native(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A client's request as it arrived, for targets whose family speaks its surface.

    Attributes:
        surface: the client's surface (`MESSAGES`, `RESPONSES`).
        body: the client's JSON body, bytes as received (a JSON object; the ingress checked it).
        headers: the client's provider headers (`passed_headers`): (lower-case name, value)
            pairs in the order sent, a header sent twice given twice.
        crossing: why the request has no translation for another family, as (message, param)
            (`param` naming the field, e.g. `messages.0.content.1`); None when the internal
            OpenAI request translates it. A target of another family is then skipped
            (`ApiFamily.refusal`), never sent a lossy stand-in.
    """

    surface: str
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()
    crossing: tuple[str, str] | None = None


def passed_headers(surface: str, headers: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """The client `headers` that `surface` passes upstream (`PASSED_HEADERS`), in order, values unchanged.

    Args:
        surface: the client's surface; one with no list passes nothing.
        headers: the request's (name, value) pairs, names in any case.

    Returns:
        (lower-case name, value) pairs; empty when none is listed or sent.
    """
    wanted = PASSED_HEADERS.get(surface)
    if not wanted:
        return ()
    return tuple((name.lower(), value) for name, value in headers if name.lower() in wanted)


def native_body(body: bytes, model: str) -> bytes:
    """The client's `body` as one target receives it: `model` set to the target's model name and the
    gateway's `provider` object (routing preferences, SPEC §10) removed; every other field — unknown
    ones included — kept, in order, with its value (the JSON is re-encoded: whitespace and escapes
    may differ, the values do not).

    Args:
        body: a JSON object's bytes (`Native.body`).
        model: the target's model name at its provider.

    Raises:
        ValueError, TypeError: `body` is not JSON, or not an object (the ingress never carries either).
    """
    try:
        data = _decode.decode(body)
    except msgspec.DecodeError as exc:
        raise ValueError("the native body is not JSON") from exc
    if not isinstance(data, dict):
        raise TypeError("the native body is not a JSON object")
    data["model"] = model
    data.pop("provider", None)
    return _encode.encode(data)
