"""`time_left_s`: a job's remaining budget on Redis's clock (table)."""

from __future__ import annotations

import pytest

from turnout.core.plan import RoutingSettings
from turnout.core.policy import Policy
from turnout.state.queue import time_left_s
from turnout.wire import JobPayload


def _payload(budget_ms: int) -> JobPayload:
    return JobPayload(
        request_id="r",
        body=b"{}",
        org="o",
        squad=None,
        key="k",
        policy=Policy(),
        settings=RoutingSettings(),
        deadline_epoch_s=0.0,
        reply_to="c",
        budget_ms=budget_ms,
    )


@pytest.mark.parametrize(
    ("budget_ms", "enqueued_ms", "now_ms", "expected_s"),
    [
        (20_000, 1_000_000, 1_000_000, 20.0),
        (20_000, 1_000_000, 1_005_000, 15.0),
        (20_000, 1_000_000, 1_020_000, 0.0),
        (20_000, 1_000_000, 1_050_000, -30.0),
    ],
    ids=["just-queued", "waited-5s", "exactly-at-deadline", "long-past"],
)
def test_time_left_counts_from_the_queue_score(
    budget_ms: int, enqueued_ms: int, now_ms: int, expected_s: float
) -> None:
    assert time_left_s(_payload(budget_ms), enqueued_ms, now_ms) == pytest.approx(expected_s)
