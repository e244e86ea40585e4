"""`POST /v1/completions`: OpenAI's legacy text completions, still sent by code-completion tools.

Owns: reading a completions body into the front door's `Inbound` (`parse_completions_request`;
the `provider` object taken out and checked as on the chat route) and answering in the
fleet's own shape (OpenAI's `text_completion` body, its stream's chunks, or an OpenAI
error body). Chat models serve it, through `openai`, `openai_compatible` and `azure_openai` offers only
(the legacy endpoint exists on OpenAI-family APIs); an offer whose API has no such call is
skipped, and a plan with none is a 400 naming why (`turnout.adapters.families.family_for`).
Must not import: `turnout_ingress.app`, `turnout_ingress.serving.front_door`.

Source: https://platform.openai.com/docs/api-reference/completions/create.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from turnout.core.limits import MAX_REQUEST_TOKENS
from turnout_ingress.serving.validation import decode_request, invalid, take_preferences
from turnout_ingress.surfaces.base import FleetShaped, Inbound
from turnout_ingress.surfaces.inputs import check_text_input

_INTEGERS: Final = {"max_tokens": (0, MAX_REQUEST_TOKENS), "n": (1, 128), "best_of": (1, 128), "logprobs": (0, 5)}
"""Integer fields and their ranges (OpenAI reference: `max_tokens` may be 0 with `echo`; `logprobs` at most 5)."""
MAX_STOPS: Final = 4
"""Most stop sequences (OpenAI reference: "Up to 4 sequences")."""
_NUMBERS: Final = {
    "temperature": (0.0, 2.0),
    "top_p": (0.0, 1.0),
    "presence_penalty": (-2.0, 2.0),
    "frequency_penalty": (-2.0, 2.0),
}
"""Number fields and their ranges (OpenAI reference)."""


def parse_completions_request(raw: bytes) -> dict[str, Any]:
    """Decode and check a completions body: the shared first checks (`decode_request`), then
    `prompt` (`turnout_ingress.surfaces.inputs`; an empty string allowed), `user` and `suffix`
    strings, `stop` a string or at most 4, `stream` and `echo` booleans, and the integers and
    numbers of `_INTEGERS` and `_NUMBERS` in range. Other
    fields pass to the provider untouched.

    Raises:
        RequestRejected: 400 naming the field (`param`).
    """
    data = decode_request(raw)
    check_text_input(data.get("prompt"), "prompt", empty=True)
    for name in ("user", "suffix"):
        text = data.get(name)
        if text is not None and not isinstance(text, str):
            raise invalid(f"`{name}` must be a string.", name)
    stop = data.get("stop")
    if stop is not None and not (
        isinstance(stop, str)
        or (isinstance(stop, list) and len(stop) <= MAX_STOPS and all(isinstance(s, str) for s in stop))
    ):
        raise invalid(f"`stop` must be a string or an array of at most {MAX_STOPS} strings.", "stop")
    for name in ("stream", "echo"):
        flag = data.get(name)
        if flag is not None and not isinstance(flag, bool):
            raise invalid(f"`{name}` must be a boolean.", name)
    for name, (low, high) in _INTEGERS.items():
        value = data.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high):
            raise invalid(f"`{name}` must be an integer from {low} to {high}.", name)
    for name, (bottom, top) in _NUMBERS.items():
        number = data.get(name)
        if number is not None and (
            isinstance(number, bool) or not isinstance(number, (int, float)) or not bottom <= number <= top
        ):
            raise invalid(f"`{name}` must be a number from {bottom:g} to {top:g}.", name)
    return data


class Completions(FleetShaped):
    """The `Surface` of OpenAI's legacy completions (module doc); answers as they are (`FleetShaped`)."""

    name = "completions"
    path = "/v1/completions"

    def parse(self, raw: bytes, headers: Mapping[str, str]) -> Inbound:
        """The checked body; the job carries the client's bytes. See `Surface.parse`."""
        body = parse_completions_request(raw)
        return Inbound(body, take_preferences(body), raw, "completions")


COMPLETIONS: Final = Completions()
"""The legacy completions surface."""
