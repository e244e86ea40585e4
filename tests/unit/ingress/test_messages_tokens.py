"""The count_tokens estimate (`turnout_ingress.surfaces.messages.tokens.estimate_input_tokens`)."""

from __future__ import annotations

from typing import Any

import pytest

from turnout_ingress.surfaces.messages.tokens import estimate_input_tokens


@pytest.mark.parametrize(
    ("body", "tokens"),
    [
        ({"messages": [{"role": "user", "content": "x" * 40}]}, 10),
        ({"messages": [{"role": "user", "content": "abc"}]}, 1),
        ({"messages": []}, 1),
        ({"system": "y" * 8, "messages": [{"role": "user", "content": [{"type": "text", "text": "z" * 8}]}]}, 4),
        (
            {
                "system": [{"type": "text", "text": "s" * 4, "cache_control": {"type": "ephemeral"}}],
                "messages": [{"role": "user", "content": "q" * 4}],
            },
            2,
        ),
        (
            {
                "messages": [
                    {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}]}
                ]
            },
            3,
        ),  # "f" + {"a": 1}
        ({"messages": [{"role": "user", "content": "hi"}], "tools": [{"name": "f", "input_schema": {}}]}, 10),
    ],
    ids=[
        "forty-chars",
        "rounded-up",
        "at-least-one",
        "system-and-blocks",
        "cache-control-not-counted",
        "tool-input-as-json",
        "tool-definitions",
    ],
)
def test_estimate_is_one_token_per_four_characters_of_what_the_model_reads(body: dict[str, Any], tokens: int) -> None:
    assert estimate_input_tokens(body) == tokens


def test_a_count_is_not_asked_of_an_offer_whose_breaker_rests() -> None:
    """Issue #40 item 3: counting goes through the breaker (read only: a count is no probe)."""
    from turnout.core.breaker import BreakerSnapshot
    from turnout.health import HealthView
    from turnout.state.breaker_store import Loaded, Versioned
    from turnout_ingress.surfaces.messages.tokens import resting

    entries = {
        "tripped": Versioned(1, BreakerSnapshot(open=True, trips=1, opened_at_s=990.0, cooldown_s=30.0)),
        "waiting": Versioned(1, BreakerSnapshot(not_before_s=1_005.0)),
        "waited": Versioned(1, BreakerSnapshot(not_before_s=999.0)),
    }
    view = HealthView(Loaded(now_s=1_000.0, entries=entries), clock=lambda: 0.0)
    assert [resting(view, t) for t in ("tripped", "waiting", "waited", "unknown")] == [True, True, False, False]
    assert not resting(None, "tripped")
    assert not resting(HealthView(Loaded(now_s=1_000.0, entries=entries), degraded=True), "tripped")
