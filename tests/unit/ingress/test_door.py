"""Door refusals: the bounded route label of any path, the sampled log, and the counter."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from support.clocks import FakeClock
from turnout.observability.metrics import Metrics
from turnout_ingress.guard.door import (
    PUBLIC_ROUTES,
    ROUTE_LABELS,
    UNSERVED_FAMILIES,
    WITH_IDS,
    DoorRefusals,
    LogSampler,
    RateCap,
    RefusalRow,
    refusal_row,
    route_label,
)

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
    assert route_label(path, PUBLIC_ROUTES, ADMIN) in ROUTE_LABELS


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
        door.refused("/v1/embeddings", 429, "rate_limit_exceeded", "ci-bot", request_id="a" * 32)
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
    assert getattr(lines[1], "request_id", None) == "a" * 32  # the line names the request it stands for
    assert not hasattr(lines[0], "request_id")


KEYS = st.sampled_from([("other", 401, "invalid_api_key"), ("other", 404, "unknown_route"), ("/v1/images", 404, "x")])


@given(
    per_s=st.integers(min_value=0, max_value=5),
    events=st.lists(st.tuples(KEYS, st.floats(min_value=0.0, max_value=2.0)), max_size=200),
)
def test_the_rate_cap_passes_at_most_per_s_a_second_per_key(
    per_s: int, events: list[tuple[tuple[str, int, str], float]]
) -> None:
    """Over a span of T seconds a key passes at most per_s × (⌊T⌋ + 1) events; a key's first event passes
    (when per_s >= 1); nothing passes with per_s 0."""
    clock = FakeClock(1000.0)
    cap = RateCap(per_s, clock=clock)
    passed: dict[tuple[str, int, str], list[float]] = {}
    seen: set[tuple[str, int, str]] = set()
    for key, step in events:
        clock.now_s += step
        took = cap.take(key)
        if key not in seen and per_s >= 1:
            assert took, "a key's first event always passes"
        seen.add(key)
        if took:
            passed.setdefault(key, []).append(clock.now_s)
    for times in passed.values():
        assert len(times) <= per_s * (int(times[-1] - times[0]) + 1)
    assert per_s >= 1 or not passed


def test_the_rate_cap_opens_a_new_window_a_second_after_the_last_opened() -> None:
    clock = FakeClock(0.0)
    cap = RateCap(2, clock=clock)
    key = ("other", 401, "invalid_api_key")
    assert [cap.take(key) for _ in range(4)] == [True, True, False, False]
    clock.now_s = 0.99
    assert not cap.take(key)
    clock.now_s = 1.0
    assert [cap.take(key) for _ in range(3)] == [True, True, False]


def test_a_row_names_the_route_label_and_folds_an_unknown_method() -> None:
    row = refusal_row(1700000000.12345, "rid", "BREW", "other", 404, "unknown_route", None, None)
    assert (row.ts, row.request_id, row.method, row.route, row.status, row.org, row.key) == (
        1700000000.123,
        "rid",
        "other",
        "other",
        404,
        None,
        None,
    )
    assert (
        refusal_row(1.0, "r", "POST", "/v1/embeddings", 429, "rate_limit_exceeded", "acme", "ci-bot").method == "POST"
    )


class Sink:
    def __init__(self) -> None:
        self.rows: list[RefusalRow] = []

    def add(self, row: RefusalRow) -> None:
        self.rows.append(row)


def test_each_refusal_is_a_row_with_the_caller_when_known_never_the_raw_path() -> None:
    sink = Sink()
    door = DoorRefusals(Metrics(), PUBLIC_ROUTES, ADMIN, LogSampler(clock=FakeClock(0.0)), sink, clock=lambda: 42.0)
    door.refused("/v1/secret-path/with/ids/123", 404, "unknown_route", None, method="GET", request_id="r1")
    door.refused("/v1/embeddings", 429, "rate_limit_exceeded", "ci-bot", org="acme", method="POST", request_id="r2")
    door.refused("/v1/chat/completions", 400, "Not A Code!", None, method="POST", request_id="r3")
    assert [(r.route, r.status, r.code, r.org, r.key, r.request_id, r.ts) for r in sink.rows] == [
        ("other", 404, "unknown_route", None, None, "r1", 42.0),
        ("/v1/embeddings", 429, "rate_limit_exceeded", "acme", "ci-bot", "r2", 42.0),
        ("/v1/chat/completions", 400, "other", None, None, "r3", 42.0),
    ]
