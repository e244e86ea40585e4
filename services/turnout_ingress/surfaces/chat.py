"""`POST /v1/chat/completions`: the OpenAI Chat Completions surface.

Owns: reading a chat completions body into the front door's `Inbound` (the checks of
`turnout_ingress.validation.parse_chat_request`; the `provider` object taken out and
checked) and answering in the fleet's own shape, which is this surface's: the worker's
answer and the direct path's frames go to the client as they are.
Must not import: `turnout_ingress.app`, `turnout_ingress.front_door`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from turnout_ingress.surfaces.base import FleetShaped, Inbound
from turnout_ingress.validation import parse_chat_request, take_preferences


class ChatCompletions(FleetShaped):
    """The `Surface` of OpenAI Chat Completions (module doc); answers as they are (`FleetShaped`)."""

    name = "chat"
    path = "/v1/chat/completions"

    def parse(self, raw: bytes, headers: Mapping[str, str]) -> Inbound:
        """The checked body; the job carries the client's bytes (the worker takes `provider` out
        again before any upstream call). See `Surface.parse`."""
        body = parse_chat_request(raw)
        return Inbound(body, take_preferences(body), raw)


CHAT: Final = ChatCompletions()
"""The chat completions surface."""
