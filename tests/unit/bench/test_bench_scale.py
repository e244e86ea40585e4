"""The arithmetic of the scale-out bench (bench/multihost/scale_figures.py): per-request figures, medians, ceiling."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

from multihost.scale_figures import (
    Window,
    ceiling_per_redis_core,
    change_pct,
    format_table,
    idle_rates,
    per_request,
    spread_pct,
    summarize,
    with_change,
)


def window(ok: int = 1000, redis_cpu_s: float = 0.2, ingress_s: float = 0.7, workers_s: float = 1.0) -> Window:
    return Window(
        elapsed_s=10.0,
        ok=ok,
        errors=0,
        cpu_s={"ingress": ingress_s, "workers": workers_s},
        redis_cpu_s=redis_cpu_s,
        commands={"evalsha": 5 * ok, "blpop": ok, "publish": ok},
        client_cpu_s=0.5,
    )


@pytest.mark.parametrize(("ms", "expected"), [(0.2, 5000.0), (1.0, 1000.0), (0.0, None), (-1.0, None)])
def test_ceiling_per_redis_core(ms: float, expected: float | None) -> None:
    assert ceiling_per_redis_core(ms) == (pytest.approx(expected) if expected else None)


def test_per_request_divides_by_answered_requests() -> None:
    figures = per_request(window())
    assert figures["rps"] == pytest.approx(100.0)
    assert figures["cpu_ms_ingress"] == pytest.approx(0.7)
    assert figures["cpu_ms_workers"] == pytest.approx(1.0)
    assert figures["cpu_ms_gateway"] == pytest.approx(1.7)
    assert figures["cpu_ms_client"] == pytest.approx(0.5)
    assert figures["redis_cpu_ms"] == pytest.approx(0.2)
    assert figures["redis_cmds"] == pytest.approx(7.0)
    assert figures["publish"] == pytest.approx(1.0)
    assert figures["ceiling_rps_per_redis_core"] == pytest.approx(5000.0)


def test_per_request_with_no_answered_request_has_no_figures() -> None:
    figures = per_request(window(ok=0))
    assert figures["rps"] == 0.0
    assert all(figures[k] is None for k in ("cpu_ms_gateway", "redis_cpu_ms", "redis_cmds", "publish"))
    assert figures["ceiling_rps_per_redis_core"] is None


def test_summarize_takes_medians_and_the_ceiling_of_the_median_redis_cpu() -> None:
    windows = [window(redis_cpu_s=0.1), window(redis_cpu_s=0.4), window(redis_cpu_s=0.25)]
    row = summarize(2, windows)
    assert row["workers"] == 2
    assert row["reps"] == 3
    assert row["ok"] == 3000
    assert row["redis_cpu_ms"] == pytest.approx(0.25)
    assert row["ceiling_rps_per_redis_core"] == pytest.approx(4000.0)
    assert list(row["redis_cmds_breakdown"]) == ["evalsha", "blpop", "publish"]
    assert row["redis_cmds_breakdown"]["evalsha"] == pytest.approx(5.0)


def test_change_against_the_first_row() -> None:
    rows = with_change([{"cpu_ms_gateway": 2.0}, {"cpu_ms_gateway": 2.1}, {"cpu_ms_gateway": None}])
    assert [r["cpu_change_pct"] for r in rows[:2]] == [pytest.approx(0.0), pytest.approx(5.0)]
    assert rows[2]["cpu_change_pct"] is None
    assert change_pct(1.0, 0.0) is None


def test_format_table_prints_every_row_and_dashes_for_missing_figures() -> None:
    rows = with_change([summarize(1, [window()]), {"workers": 4}])
    lines = format_table(rows).splitlines()
    assert len(lines) == 4
    assert lines[2].startswith("| 1 | 100 | 0.700 | 1.000 | 1.700 | +0.0 % | — | — | — | — | 0.200 |")
    assert "5,000" in lines[2]
    assert lines[3].startswith("| 4 | — |")


def test_idle_rates_per_second_and_the_gateway_net_of_them() -> None:
    idle = Window(elapsed_s=2.0, ok=0, errors=0, cpu_s={"ingress": 0.002, "workers": 0.02}, redis_cpu_s=0.004)
    rates = idle_rates(idle)
    assert rates == {"ingress": pytest.approx(1.0), "workers": pytest.approx(10.0), "redis": pytest.approx(2.0)}
    # 10 s window: 110 ms of the gateway's 1,700 ms are its idle rate -> (1700 - 110) / 1000 requests
    assert per_request(window(), rates)["cpu_ms_gateway_net"] == pytest.approx(1.59)
    assert "cpu_ms_gateway_net" not in per_request(window())
    assert idle_rates(Window(elapsed_s=0.0, ok=0, errors=0, cpu_s={}, redis_cpu_s=0.0)) == {}


def test_summarize_with_idle_has_net_figures_rates_and_the_spread() -> None:
    idle = Window(elapsed_s=1.0, ok=0, errors=0, cpu_s={"ingress": 0.0, "workers": 0.01}, redis_cpu_s=0.0)
    rows = with_change(
        [
            summarize(1, [window(workers_s=1.0), window(workers_s=1.2)], idle),
            summarize(2, [window(workers_s=1.3)], idle),
        ]
    )
    assert rows[0]["idle_ms_s_workers"] == pytest.approx(10.0)
    assert rows[0]["cpu_ms_gateway"] == pytest.approx(1.8)
    assert rows[0]["cpu_ms_gateway_net"] == pytest.approx(1.7)
    assert rows[0]["cpu_gateway_spread_pct"] == pytest.approx(0.2 / 1.8 * 100)
    assert rows[1]["cpu_gateway_spread_pct"] is None
    assert rows[1]["cpu_net_change_pct"] == pytest.approx((1.9 / 1.7 - 1) * 100)


@pytest.mark.parametrize(
    ("values", "expected"), [([1.0, 2.0, 3.0], 100.0), ([2.0, 2.0], 0.0), ([5.0], None), ([0.0, 0.0], None)]
)
def test_spread_pct(values: list[float], expected: float | None) -> None:
    assert spread_pct(values) == (pytest.approx(expected) if expected is not None else None)


@given(
    ok=st.integers(min_value=1, max_value=10**6),
    roles=st.dictionaries(st.sampled_from(["ingress", "workers"]), st.floats(0, 1e4), min_size=1),
    redis_s=st.floats(min_value=1e-6, max_value=1e4),
)
def test_gateway_cpu_is_the_sum_of_the_roles_and_ceiling_times_redis_cpu_is_1000(
    ok: int, roles: dict[str, float], redis_s: float
) -> None:
    figures = per_request(Window(elapsed_s=1.0, ok=ok, errors=0, cpu_s=roles, redis_cpu_s=redis_s))
    assert figures["cpu_ms_gateway"] == pytest.approx(sum(figures[f"cpu_ms_{r}"] or 0 for r in roles))
    assert figures["ceiling_rps_per_redis_core"] is not None and figures["redis_cpu_ms"] is not None
    assert figures["ceiling_rps_per_redis_core"] * figures["redis_cpu_ms"] == pytest.approx(1000.0)
