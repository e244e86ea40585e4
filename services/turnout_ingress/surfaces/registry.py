"""The client surfaces the front door serves, and their registry.

Owns: `SURFACES`, the one list of the `POST` routes served through the front door
(`turnout_ingress.serving.front_door`). Adding a surface: a module here implementing
`turnout_ingress.surfaces.base.Surface` (parse its request into the canonical one, render
the fleet's answer, its stream and its errors in its own shape) and one line below.
Must not import: `turnout_ingress.app`, `turnout_ingress.serving.front_door`.
"""

from __future__ import annotations

from typing import Final

from turnout_ingress.surfaces.base import Inbound, Surface
from turnout_ingress.surfaces.chat import CHAT
from turnout_ingress.surfaces.completions import COMPLETIONS
from turnout_ingress.surfaces.embeddings import EMBEDDINGS
from turnout_ingress.surfaces.messages.surface import MESSAGES
from turnout_ingress.surfaces.responses.surface import RESPONSES

SURFACES: Final[tuple[Surface, ...]] = (CHAT, MESSAGES, EMBEDDINGS, COMPLETIONS, RESPONSES)
"""Every surface, in the order their routes are registered."""

__all__ = ["SURFACES", "Inbound", "Surface"]
