"""A queued job's payload for tests of the queue: the fields a test varies, the rest defaulted."""

from __future__ import annotations

from turnout.core.plan import RoutingSettings
from turnout.core.policy import Policy
from turnout.wire import JobPayload


def job_payload(request_id: str, deadline_epoch_s: float, *, org: str = "acme", reply_to: str = "r") -> JobPayload:
    """A `JobPayload` of `org` (key `k`, default policy and settings, body `{}`) due at
    `deadline_epoch_s` (epoch seconds), answered on `reply_to`."""
    return JobPayload(
        request_id=request_id,
        body=b"{}",
        org=org,
        squad=None,
        key="k",
        policy=Policy(),
        settings=RoutingSettings(),
        deadline_epoch_s=deadline_epoch_s,
        reply_to=reply_to,
    )
