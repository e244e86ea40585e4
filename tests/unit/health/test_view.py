"""One request's read (`turnout.health.view.HealthView`; SPEC §5 "Ordering", §10)."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from support.breakers import (
    FRESH_RUN,
    NOW,
    SETTINGS,
    Fleet,
    T,
    U,
    opened,
)
from turnout.core.breaker import (
    CLOSED,
    NOT_BEFORE_SLACK_S,
    Admission,
    BreakerSnapshot,
    admit,
    score,
)
from turnout.core.ordering import Standing, TargetHealth
from turnout.health import (
    HealthView,
)
from turnout.state.breaker_store import Loaded, Versioned

# ------------------------------------------------------------------ HealthView


def _view(snapshots: dict[str, BreakerSnapshot], *, degraded: bool = False) -> HealthView:
    return HealthView(
        Loaded(now_s=NOW, entries={t: Versioned(1, s) for t, s in snapshots.items()}),
        clock=lambda: 0.0,
        degraded=degraded,
    )


def _resting(until: float) -> BreakerSnapshot:
    return BreakerSnapshot(not_before_s=until)


UNAVAILABLE_CASES = [
    ({T: opened(990.0), U: opened(995.0)}, [T, U], 10.0),
    ({T: opened(990.0), U: opened(999.0, cooldown=5.0)}, [T, U], 4.0),
    ({T: opened(990.0)}, [T], 10.0),
    ({T: opened(990.0), U: opened(900.0)}, [T, U], None),  # U is HALF_OPEN
    ({T: opened(990.0), U: BreakerSnapshot(successes=3.0)}, [T, U], None),  # U is CLOSED
    ({T: opened(990.0)}, [T, U], None),  # U unknown: CLOSED
    ({T: opened(990.0)}, [], None),
    ({T: opened(980.0)}, [T], None),  # exactly at the cooldown's end: HALF_OPEN
    ({T: _resting(1030.0)}, [T], 30.0 - NOT_BEFORE_SLACK_S),  # CLOSED but resting
    ({T: _resting(1030.0), U: opened(990.0)}, [T, U], 10.0),
    ({T: _resting(NOW + NOT_BEFORE_SLACK_S)}, [T], None),  # the rest has just ended
    ({T: msgspec.structs.replace(opened(900.0), not_before_s=1008.5)}, [T], 8.0),  # HALF_OPEN, resting
    ({T: msgspec.structs.replace(opened(990.0), not_before_s=1030.0)}, [T], 29.5),  # OPEN and resting longer
]


@pytest.mark.parametrize(
    ("snapshots", "targets", "expected"),
    UNAVAILABLE_CASES,
    ids=[
        "all-open-min",
        "all-open-shorter-cooldown",
        "one-open",
        "one-half-open",
        "one-closed",
        "one-unknown",
        "no-targets",
        "boundary-half-open",
        "resting",
        "resting-and-open",
        "rest-just-ended",
        "half-open-resting",
        "open-resting-longer",
    ],
)
def test_health_view_unavailable_for(
    snapshots: dict[str, BreakerSnapshot], targets: Sequence[str], expected: float | None
) -> None:
    result = _view(snapshots).unavailable_for(targets)
    if expected is None:
        assert result is None
    else:
        assert result == pytest.approx(expected)


def test_health_view_degraded_is_never_unavailable() -> None:
    assert _view({T: opened(990.0)}, degraded=True).unavailable_for([T]) is None


def test_health_view_extrapolates_with_its_clock() -> None:
    mono = [100.0]
    view = HealthView(Loaded(now_s=NOW, entries={T: Versioned(1, opened(990.0))}), clock=lambda: mono[0])
    mono[0] += 4.0
    assert (view.age_s(), view.store_now()) == (4.0, NOW + 4.0)
    assert view.unavailable_for([T]) == pytest.approx(6.0)


_snapshots = st.builds(
    BreakerSnapshot,
    open=st.booleans(),
    trips=st.integers(0, 5),
    opened_at_s=st.floats(900.0, 1000.0),
    cooldown_s=st.sampled_from([5.0, 10.0, 20.0]),
    successes=st.floats(0.0, 50.0),
    failures=st.floats(0.0, 50.0),
    counted_at_s=st.floats(900.0, 1000.0),
    not_before_s=st.one_of(st.just(0.0), st.floats(990.0, 1100.0)),
)


@hsettings(max_examples=200)
@given(snaps=st.lists(_snapshots, min_size=1, max_size=4))
def test_health_view_unavailable_for_is_when_the_first_target_is_back(snaps: list[BreakerSnapshot]) -> None:
    """None exactly when some target may be attempted now (admit neither REJECTs
    nor RESTs it); otherwise a wait after which one may, and before which none may."""
    targets = [f"p{i}/m" for i in range(len(snaps))]
    view = _view(dict(zip(targets, snaps)))
    blocked = {Admission.REJECT, Admission.REST}

    def all_blocked(at: float) -> bool:
        return all(admit(s, at, SETTINGS) in blocked for s in snaps)

    wait = view.unavailable_for(targets)
    if wait is None:
        assert not all_blocked(NOW)
    else:
        assert wait > 0 and all_blocked(NOW)
        assert not all_blocked(NOW + wait + 1e-6)
        assert all_blocked(NOW + wait * (1 - 1e-6) - 1e-6)


@hsettings(max_examples=200)
@given(snaps=st.lists(_snapshots, min_size=1, max_size=4))
def test_health_view_ordering_health_agrees_with_admission(snaps: list[BreakerSnapshot]) -> None:
    targets = [f"p{i}/m" for i in range(len(snaps))]
    view = _view(dict(zip(targets, snaps)))
    health = view.ordering_health(SETTINGS)
    for target, snap in zip(targets, snaps):
        if snap == CLOSED:
            assert target not in health
            continue
        fact = health[target]
        decision = admit(snap, NOW, SETTINGS)
        expected = {Admission.REJECT: Standing.DOWN, Admission.REST: Standing.DOWN, Admission.PROBE: Standing.PROBE}
        assert fact.standing is expected.get(decision, Standing.UP)
        assert (fact.back_in_s > 0) == (fact.standing is Standing.DOWN)
        assert 0.0 < fact.score <= 1.0
        assert fact.score == pytest.approx(score(snap, NOW, SETTINGS))


def test_health_view_ordering_health_table() -> None:
    view = _view(
        {
            T: BreakerSnapshot(successes=3.0, failures=1.0, counted_at_s=NOW),
            U: opened(995.0),
            "half/open": opened(900.0),
            "rest/ing": _resting(1020.0),
            "never/seen": CLOSED,
        }
    )
    assert view.ordering_health(SETTINGS) == {
        T: TargetHealth(score=pytest.approx(5 / 6), standing=Standing.UP, back_in_s=0.0),  # type: ignore[arg-type]
        U: TargetHealth(score=pytest.approx(2 / 7), standing=Standing.DOWN, back_in_s=15.0),  # type: ignore[arg-type]
        "half/open": TargetHealth(
            score=pytest.approx(2 / 7),  # type: ignore[arg-type]
            standing=Standing.PROBE,
            back_in_s=0.0,
        ),
        "rest/ing": TargetHealth(score=1.0, standing=Standing.DOWN, back_in_s=20.0 - NOT_BEFORE_SLACK_S),
    }


async def test_health_view_old_failures_fade_without_traffic(fleet: Fleet) -> None:
    await fleet.fail(FRESH_RUN - 1)
    await fleet.succeed(1)
    scores = []
    for _ in range(5):
        scores.append((await fleet.view()).ordering_health(SETTINGS)[T].score)
        fleet.time.advance(SETTINGS.window / 2)
    assert scores == sorted(scores) and scores[0] < 0.5
    assert scores[-1] > 0.95, "after two windows the failures have all but faded"
