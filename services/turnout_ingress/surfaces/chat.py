"""`POST /v1/chat/completions`: the OpenAI Chat Completions surface.

Owns: reading a chat completions body into the front door's `Inbound` (the checks of
`turnout_ingress.validation.parse_chat_request`; the `provider` object taken out and
checked) and answering in the fleet's own shape, which is this surface's: the worker's
answer and the direct path's frames go to the client as they are.
Must not import: `turnout_ingress.app`, `turnout_ingress.front_door`.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Mapping
from typing import Any, Final

from starlette.responses import Response

from turnout_ingress.errors import JSON
from turnout_ingress.surfaces.base import Inbound
from turnout_ingress.validation import parse_chat_request, take_preferences


class ChatCompletions:
    """The `Surface` of OpenAI Chat Completions (module doc)."""

    name = "chat"
    path = "/v1/chat/completions"

    def parse(self, raw: bytes) -> Inbound:
        """The checked body; the job carries the client's bytes (the worker takes `provider` out
        again before any upstream call). See `Surface.parse`."""
        body = parse_chat_request(raw)
        return Inbound(body, take_preferences(body), raw)

    def render(self, status: int, body: bytes, headers: Mapping[str, str], request_id: str) -> Response:
        """The fleet's answer as it is; see `Surface.render`."""
        return Response(body, status_code=status, headers=dict(headers), media_type=JSON)

    def render_stream(self, frames: AsyncIterable[Any], inbound: Inbound) -> AsyncIterable[Any]:
        """The frames as they are; see `Surface.render_stream`."""
        return frames


CHAT: Final = ChatCompletions()
"""The chat completions surface."""
