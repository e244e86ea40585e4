"""Server-side SVG charts of the dashboard: data in, an SVG string out.

Owns: drawing — stacked bars (requests by outcome), lines (latency
percentiles), a target's lane (breaker states as coloured bands with words,
its traffic share as a line, its transitions as markers) and plain bars (spend
per day) — as pure functions returning inline SVG. Every chart is an image
with a title and a description (`role="img"`, `aria-labelledby`); every colour
comes with words (a legend, a band's label, an element's `<title>`); every
text is escaped. No script, no style element or attribute (the pages' Content
Security Policy): presentation attributes only.
Must not import: FastAPI, Redis.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from html import escape

from turnout_ingress.ui.timeline import WORDS, Event, Segment, marker_words

WIDTH = 720
PAD_L, PAD_R, PAD_T, PAD_B = 52, 12, 26, 22
COLOURS = {
    "ok": "#1a7f37",
    "recovered": "#bf8700",
    "failed": "#b3261e",
    "p50": "#3b6fd8",
    "p95": "#8250df",
    "closed": "#d5ecdc",
    "open": "#b3261e",
    "half_open": "#e3a008",
    "resting": "#8c95a6",
    "share": "#1f4fa3",
    "bar": "#3b6fd8",
    "over": "#b3261e",
}
"""Colours by series or state; each is drawn with its words beside it."""


def _hhmm(epoch_s: float, seconds: bool = False) -> str:
    return time.strftime("%H:%M:%S" if seconds else "%H:%M", time.gmtime(epoch_s))


def _num(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


def _frame(ident: str, title: str, desc: str, height: int, body: Sequence[str]) -> str:
    """The `<svg>` around `body`, titled and described for assistive technology."""
    i = escape(ident)
    return (
        f'<svg class="chart" id="{i}" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" '
        f'role="img" aria-labelledby="{i}-t {i}-d" xmlns="http://www.w3.org/2000/svg">'
        f'<title id="{i}-t">{escape(title)}</title><desc id="{i}-d">{escape(desc)}</desc>'
        f'<text x="{PAD_L}" y="15" font-size="12" font-weight="600" fill="#1d2330">{escape(title)}</text>'
        + "".join(body)
        + "</svg>"
    )


def _legend(items: Sequence[tuple[str, str]], y: int = 15) -> list[str]:
    """Colour squares with their words, right-aligned on the title's line."""
    x = WIDTH - PAD_R - sum(7 * len(label) + 22 for label, _ in items)
    out: list[str] = []
    for label, colour in items:  # in reading order
        out.append(
            f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{colour}"/>'
            f'<text x="{x + 14}" y="{y}" font-size="11" fill="#4a5263">{escape(label)}</text>'
        )
        x += 7 * len(label) + 22
    return out


def _time_axis(start_s: float, span_s: float, y: int, ticks: int = 6) -> list[str]:
    out = [f'<line x1="{PAD_L}" y1="{y}" x2="{WIDTH - PAD_R}" y2="{y}" stroke="#c5cad3"/>']
    plot = WIDTH - PAD_L - PAD_R
    for k in range(ticks + 1):
        x = PAD_L + plot * k / ticks
        label = _hhmm(start_s + span_s * k / ticks, seconds=span_s <= 1800)
        anchor = "start" if k == 0 else "end" if k == ticks else "middle"
        out.append(
            f'<text x="{x:.1f}" y="{y + 14}" font-size="10" fill="#6b7385" text-anchor="{anchor}">{label}</text>'
        )
    return out


def _y_axis(top: float, bottom: float, high: float, unit: str) -> list[str]:
    out: list[str] = []
    for k in (0, 0.5, 1):
        y = bottom - (bottom - top) * k
        out.append(
            f'<line x1="{PAD_L}" y1="{y:.1f}" x2="{WIDTH - PAD_R}" y2="{y:.1f}" stroke="#eef0f4"/>'
            f'<text x="{PAD_L - 4}" y="{y + 3:.1f}" font-size="10" fill="#6b7385" text-anchor="end">'
            f"{_num(high * k)}{escape(unit)}</text>"
        )
    return out


def stacked_bars(
    ident: str,
    title: str,
    start_s: float,
    step_s: float,
    series: Sequence[tuple[str, Sequence[float]]],
    height: int = 170,
) -> str:
    """Bars per time bucket, `series` ((name, values per bucket), bottom first, names in `COLOURS`
    or drawn in grey) stacked; each bar's `<title>` gives its time and every series' value."""
    n = max((len(v) for _, v in series), default=0)
    totals = [sum(v[i] for _, v in series) for i in range(n)]
    high = max(totals, default=0) or 1
    top, bottom = PAD_T, height - PAD_B
    body = _legend([(name, COLOURS.get(name, "#999")) for name, _ in series]) + _y_axis(top, bottom, high, "")
    width = (WIDTH - PAD_L - PAD_R) / max(n, 1)
    for i in range(n):
        x, y = PAD_L + i * width, float(bottom)
        words = ", ".join(f"{name} {_num(v[i])}" for name, v in series)
        parts = [f"<title>{_hhmm(start_s + i * step_s, True)}: {escape(words)}</title>"]
        for name, values in series:
            h = (bottom - top) * values[i] / high
            if h > 0:
                y -= h
                parts.append(
                    f'<rect x="{x + 0.5:.1f}" y="{y:.1f}" width="{max(width - 1, 0.5):.1f}" height="{h:.1f}" '
                    f'fill="{COLOURS.get(name, "#999")}"/>'
                )
        body.append(f'<g class="bar">{"".join(parts)}</g>')
    body += _time_axis(start_s, step_s * n, bottom)
    desc = f"{title}: {sum(totals):g} in all, at most {max(totals, default=0):g} per {_num(step_s)} s bucket."
    return _frame(ident, title, desc, height, body)


def lines(
    ident: str,
    title: str,
    start_s: float,
    step_s: float,
    series: Sequence[tuple[str, Sequence[float | None]]],
    unit: str = " ms",
    height: int = 170,
) -> str:
    """A line per series ((name, values per bucket; None: no value, a gap)), with the last value of
    each in the legend."""
    n = max((len(v) for _, v in series), default=0)
    known = [v for _, values in series for v in values if v is not None]
    high = max(known, default=0) or 1
    top, bottom = PAD_T, height - PAD_B
    width = (WIDTH - PAD_L - PAD_R) / max(n, 1)
    legend = []
    body = _y_axis(top, bottom, high, unit)
    for name, values in series:
        colour = COLOURS.get(name, "#999")
        runs: list[list[str]] = [[]]
        for i, v in enumerate(values):
            if v is None:
                runs.append([])
                continue
            runs[-1].append(f"{PAD_L + (i + 0.5) * width:.1f},{bottom - (bottom - top) * v / high:.1f}")
        for run in runs:
            if len(run) == 1:
                x, y = run[0].split(",")
                body.append(f'<circle cx="{x}" cy="{y}" r="2" fill="{colour}"><title>{escape(name)}</title></circle>')
            elif run:
                body.append(
                    f'<polyline points="{" ".join(run)}" fill="none" stroke="{colour}" stroke-width="1.8">'
                    f"<title>{escape(name)}</title></polyline>"
                )
        last = next((v for v in reversed(values) if v is not None), None)
        legend.append((f"{name} {_num(last)}{unit}" if last is not None else f"{name} —", colour))
    body = _legend(legend) + body + _time_axis(start_s, step_s * n, bottom)
    desc = f"{title}: " + "; ".join(label for label, _ in legend) + f" (latest of {n} buckets of {_num(step_s)} s)."
    return _frame(ident, title, desc, height, body)


def lane(
    ident: str,
    target: str,
    start_s: float,
    end_s: float,
    states: Sequence[Segment],
    share: Sequence[float],
    events: Sequence[Event],
    moved: str = "",
    height: int = 108,
) -> str:
    """One target's timeline: its breaker states as bands (each labelled when wide enough and
    titled always), its share of the attempts (0..100 %) as a line over them, and a marker per
    transition; `moved` (words: where its traffic went) ends the description."""
    span = end_s - start_s
    plot = WIDTH - PAD_L - PAD_R
    band_top, band_bottom = PAD_T + 16, height - PAD_B - 20
    share_top, share_bottom = band_bottom + 2, height - PAD_B

    def x_of(t: float) -> float:
        return PAD_L + plot * min(max((t - start_s) / span, 0.0), 1.0)

    body = _legend(
        [(WORDS[s], COLOURS[s]) for s in ("closed", "open", "half_open", "resting")] + [("share", COLOURS["share"])],
        y=31,
    )
    body.append(
        f'<text x="{PAD_L - 4}" y="{band_top + 14}" font-size="10" fill="#6b7385" text-anchor="end">state</text>'
    )
    body.append(
        f'<text x="{PAD_L - 4}" y="{share_bottom}" font-size="10" fill="#6b7385" text-anchor="end">share</text>'
    )
    for s0, s1, state in states:
        x0, x1 = x_of(s0), x_of(s1)
        words = f"{WORDS[state]} {_hhmm(s0, True)}–{_hhmm(s1, True)}"
        text = ""
        if x1 - x0 > 7 * len(WORDS[state]) + 6 and state != "closed":
            text = (
                f'<text x="{x0 + 4:.1f}" y="{band_top + 14}" font-size="11" '
                f'fill="{"#fff" if state == "open" else "#1d2330"}">{escape(WORDS[state])}</text>'
            )
        body.append(
            f'<g class="state {state}"><title>{escape(words)}</title><rect x="{x0:.1f}" y="{band_top}" '
            f'width="{max(x1 - x0, 0.5):.1f}" height="{band_bottom - band_top}" fill="{COLOURS[state]}"/>{text}</g>'
        )
    if share:
        w = plot / len(share)
        points = " ".join(
            f"{PAD_L + (i + 0.5) * w:.1f},{share_bottom - (share_bottom - share_top) * v:.1f}"
            for i, v in enumerate(share)
        )
        body.append(
            f'<polyline points="{points}" fill="none" stroke="{COLOURS["share"]}" stroke-width="1.5">'
            f"<title>share of attempts, 0–100 %</title></polyline>"
        )
    for e in events:
        if start_s <= e.ts <= end_s:
            x = x_of(e.ts)
            body.append(
                f'<g class="marker {escape(e.event)}"><title>{escape(marker_words(e))}</title>'
                f'<line x1="{x:.1f}" y1="{band_top - 4}" x2="{x:.1f}" y2="{share_bottom}" stroke="#1d2330" '
                f'stroke-dasharray="2 2"/><circle cx="{x:.1f}" cy="{band_top - 4}" r="3" fill="#1d2330"/></g>'
            )
    body += _time_axis(start_s, span, height - PAD_B)
    kinds = (
        ", ".join(f"{e.event} at {_hhmm(e.ts, True)}" for e in events if start_s <= e.ts <= end_s) or "no transition"
    )
    peak = max(share, default=0.0) * 100
    desc = f"{target}: {kinds}; share of attempts up to {peak:.0f} %." + (f" {moved}" if moved else "")
    return _frame(ident, target, desc, height, body)


def bars(ident: str, title: str, items: Sequence[tuple[str, float, bool]], unit: str = "$", height: int = 170) -> str:
    """One bar per item ((label, value, flagged)); a flagged bar (e.g. over budget) is drawn in the
    alarm colour and its label says so; each bar shows its value above it."""
    high = max((v for _, v, _ in items), default=0) or 1
    top, bottom = PAD_T + 12, height - PAD_B
    width = (WIDTH - PAD_L - PAD_R) / max(len(items), 1)
    body = _legend([("spend", COLOURS["bar"]), ("over budget", COLOURS["over"])])
    for i, (label, value, flagged) in enumerate(items):
        h = (bottom - top) * value / high
        x = PAD_L + i * width
        colour = COLOURS["over"] if flagged else COLOURS["bar"]
        words = f"{label}: {unit}{value:,.4f}" + (" (over budget)" if flagged else "")
        body.append(
            f'<g class="bar{" over" if flagged else ""}"><title>{escape(words)}</title>'
            f'<rect x="{x + width * 0.15:.1f}" y="{bottom - h:.1f}" width="{width * 0.7:.1f}" height="{h:.1f}" fill="{colour}"/>'
            f'<text x="{x + width / 2:.1f}" y="{bottom - h - 3:.1f}" font-size="10" text-anchor="middle" fill="#1d2330">'
            f"{escape(unit)}{value:,.2f}{' ⚠' if flagged else ''}</text>"
            f'<text x="{x + width / 2:.1f}" y="{bottom + 14}" font-size="10" text-anchor="middle" fill="#6b7385">'
            f"{escape(label)}</text></g>"
        )
    body.append(f'<line x1="{PAD_L}" y1="{bottom}" x2="{WIDTH - PAD_R}" y2="{bottom}" stroke="#c5cad3"/>')
    desc = f"{title}: " + ", ".join(f"{label} {unit}{value:,.2f}" for label, value, _ in items) + "."
    return _frame(ident, title, desc, height, body)
