"""`POST /v1/chat/completions`: the OpenAI Chat Completions surface.

Owns: reading a chat completions body into the front door's `Inbound` (the checks of
`turnout_ingress.serving.validation.parse_chat_request`; the `provider` object taken out and
checked; an `OpenAI-Beta` header carried to OpenAI-family targets, as `anthropic-beta` is on
the Messages surface) and answering in the fleet's own shape, which is this surface's: the
worker's answer and the direct path's frames go to the client as they are.
Must not import: `turnout_ingress.app`, `turnout_ingress.serving.front_door`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from turnout.core.native import CHAT as NATIVE_CHAT
from turnout.core.native import Native
from turnout_ingress.serving.validation import parse_chat_request, provider_headers, take_preferences
from turnout_ingress.surfaces.base import FleetShaped, Inbound


class ChatCompletions(FleetShaped):
    """The `Surface` of OpenAI Chat Completions (module doc); answers as they are (`FleetShaped`)."""

    name = "chat"
    path = "/v1/chat/completions"

    def parse(self, raw: bytes, headers: Mapping[str, str]) -> Inbound:
        """The checked body; the job carries the client's bytes (the worker takes `provider` out
        again before any upstream call), and, when the client sent an `OpenAI-Beta` header, a chat
        carry (`Native` of surface `chat`) holding it for OpenAI-family targets. See `Surface.parse`.

        Raises:
            RequestRejected: 400 naming the field; an `openai-beta` value that is not printable ASCII.
        """
        body = parse_chat_request(raw)
        native = None
        if "openai-beta" in headers:  # most requests carry nothing
            native = Native(surface=NATIVE_CHAT, body=raw, headers=provider_headers(NATIVE_CHAT, headers.items()))
        return Inbound(body, take_preferences(body), raw, native=native)


CHAT: Final = ChatCompletions()
"""The chat completions surface."""
