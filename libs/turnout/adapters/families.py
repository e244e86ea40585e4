"""The registry of upstream API families: a provider's `kind` -> its family.

Owns: `FAMILIES`, the one place that says which `ApiFamily` speaks for a
provider kind (`turnout.config.ProviderKind`). `turnout.adapters.exchange`
looks every call up here; nothing else chooses a family.
Must not import: `turnout.adapters.exchange`, services, FastAPI, arq.

Adding a family: write its module in `turnout/adapters/` (a class
implementing `turnout.adapters.base.ApiFamily`), name its kind in
`ProviderKind`, and add one line below (a test fails when the two differ).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from turnout.adapters.anthropic_chat import ANTHROPIC_MESSAGES
from turnout.adapters.base import ApiFamily
from turnout.adapters.openai_chat import OPENAI_CHAT
from turnout.config import ProviderKind

FAMILIES: Final[Mapping[ProviderKind, ApiFamily]] = MappingProxyType(
    {
        "openai": OPENAI_CHAT,
        "openai_compatible": OPENAI_CHAT,
        "anthropic": ANTHROPIC_MESSAGES,
    }
)
"""Provider kind -> the API family its providers speak (read-only)."""
