"""Malformed `provider` objects (per-request preferences, SPEC §10) for the tests of every route
that reads one (`/v1/chat/completions`, `/v1/messages`): each with the field its 400 names.

Owns: `MALFORMED_PROVIDERS`, `pytest.mark.parametrize` cases of (provider value, `param`).
"""

from __future__ import annotations

import pytest

MALFORMED_PROVIDERS = [
    pytest.param("sim-a", "provider", id="not-an-object"),
    pytest.param({"sort": "cheapest"}, "provider.sort", id="unknown-sort"),
    pytest.param({"only": ["sim-a", 7]}, "provider.only[1]", id="only-not-a-name"),
    pytest.param({"max_price": {"prompt": -1}}, "provider.max_price.prompt", id="negative-price"),
    pytest.param({"fallbacks": False}, "provider.fallbacks", id="unknown-field"),
]
"""(the body's `provider` value, the `param` of the 400 that refuses it)."""
