"""Health score over time for the Providers page: the sparkline of a target's samples.

Owns: drawing a target's health-score samples (`turnout.state.score_samples`:
taken when the Providers page or its live fragment is rendered, at most one
per target every `INTERVAL_S`; the sparkline then covers up to
`KEEP * INTERVAL_S` seconds, 10 minutes, with gaps closed up) as an inline
SVG polyline.
Must not import: FastAPI.
"""

from __future__ import annotations

from collections.abc import Sequence

from turnout.state.score_samples import INTERVAL_S, KEEP, TTL_S, read, sample

__all__ = ["INTERVAL_S", "KEEP", "TTL_S", "read", "sample", "sparkline"]


def sparkline(points: Sequence[tuple[float, float]], width: int = 120, height: int = 24) -> str:
    """The `points` attribute of an SVG polyline for scores in 0..1 (empty string: nothing to draw).

    Samples are spaced evenly left to right, oldest first; score 1.0 is the
    top edge and 0.0 the bottom, with a pixel of margin. A single sample is
    drawn as a flat line.
    """
    if not points:
        return ""
    values = [min(1.0, max(0.0, v)) for _, v in points]
    if len(values) == 1:
        values = values * 2
    step = (width - 2) / (len(values) - 1)
    return " ".join(f"{1 + i * step:.1f},{1 + (1.0 - v) * (height - 2):.1f}" for i, v in enumerate(values))
