"""Door refusals: the bounded route label of any path, the sampled log, and the counter."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from support.clocks import FakeClock
from turnout.observability.metrics import Metrics
from turnout_ingress.door import PUBLIC_ROUTES, UNSERVED_FAMILIES, WITH_IDS, DoorRefusals, LogSampler, route_label

ADMIN = "/admin/v1/"


@pytest.mark.parametrize(
    ("path", "label"),
    [
        ("/v1/chat/completions", "/v1/chat/completions"),
        ("/v1/embeddings", "/v1/embeddings"),
        ("/v1/completions", "/v1/completions"),
        ("/admin/v1/orgs/acme", "admin"),
        ("/v1/images/generations", "/v1/images"),
        ("/v1/audio/speech", "/v1/audio"),
        ("/v1/messages/batches/msgbatch_1/results", "/v1/messages/batches"),
        ("/v1/imagesXYZ", "other"),
        ("/no/such/path", "other"),
        ("/v1/chat/completions/", "other"),
        ("/v1/models/demo-gpt", "/v1/models"),
    ],
)
def test_route_label_of_a_path(path: str, label: str) -> None:
    assert route_label(path, PUBLIC_ROUTES, ADMIN) == label


@given(st.text(max_size=80))
def test_route_label_is_always_from_the_closed_set(path: str) -> None:
    assert route_label(path, PUBLIC_ROUTES, ADMIN) in PUBLIC_ROUTES | set(UNSERVED_FAMILIES) | {"admin", "other"} | set(
        WITH_IDS
    )


def test_the_sampler_writes_one_line_a_second_per_key_and_counts_what_it_folded() -> None:
    clock = FakeClock(100.0)
    sampler = LogSampler(every_s=1.0, clock=clock)
    key = ("/v1/chat/completions", 401, "invalid_api_key")
    assert sampler.take(key) == 1
    assert [sampler.take(key) for _ in range(5)] == [None] * 5
    assert sampler.take(("/v1/embeddings", 401, "invalid_api_key")) == 1  # another key: its own line
    clock.now_s += 1.0
    assert sampler.take(key) == 6  # this one and the five folded


def _sample(metrics: Metrics, **labels: str) -> float:
    value = metrics.registry.get_sample_value("turnout_door_refusals_total", labels)
    return value or 0.0


def test_refusals_are_counted_by_route_status_and_code_and_logged_with_the_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    metrics = Metrics()
    door = DoorRefusals(metrics, PUBLIC_ROUTES, ADMIN, LogSampler(clock=FakeClock(0.0)))
    with caplog.at_level(logging.INFO, logger="turnout.ingress.door"):
        door.refused("/v1/images/generations", 404, "unknown_route", None)
        door.refused("/v1/embeddings", 429, "rate_limit_exceeded", "ci-bot")
        door.refused("/v1/embeddings", 429, "rate_limit_exceeded", "ci-bot")
        door.refused("/v1/chat/completions", 400, "Not A Code!", None)
    assert _sample(metrics, route="/v1/images", status="404", code="unknown_route") == 1
    assert _sample(metrics, route="/v1/embeddings", status="429", code="rate_limit_exceeded") == 2
    assert _sample(metrics, route="/v1/chat/completions", status="400", code="other") == 1
    lines = [r for r in caplog.records if r.getMessage() == "door refusal"]
    assert [(r.route, r.status, r.key) for r in lines] == [  # type: ignore[attr-defined]
        ("/v1/images", 404, None),
        ("/v1/embeddings", 429, "ci-bot"),  # the second 429 folded into the next line
        ("/v1/chat/completions", 400, None),
    ]
