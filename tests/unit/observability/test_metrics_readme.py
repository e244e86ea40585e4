"""The metrics table (docs/observability.md) names every series `/metrics` exports, by its exported name, type and labels.

A process's series are all on `Metrics`'s registry; each labelled one is observed once here
(through the hooks the processes use) so its labels show in the exposition.
"""

from __future__ import annotations

import re

from support.docs import ROOT
from support.metric_series import exported, observed

README = ROOT / "docs" / "observability.md"
ROW = re.compile(r"^\| `(turnout_[a-z_]+)` \| (counter|gauge|histogram) \|([^|]*)\|")


def readme_table() -> dict[str, tuple[str, frozenset[str]]]:
    """Series name -> (type, label names) from README's metrics table."""
    rows: dict[str, tuple[str, frozenset[str]]] = {}
    for line in README.read_text().splitlines():
        if (match := ROW.match(line)) is not None:
            name, kind, labels = match.groups()
            assert name not in rows, f"{name} is in README's table twice"
            rows[name] = (kind, frozenset(re.findall(r"`([a-z_]+)`", labels)))
    return rows


def test_readme_lists_every_exported_series_by_its_exported_name_type_and_labels() -> None:
    table, series = readme_table(), exported(observed())
    assert sorted(set(series) - set(table)) == [], "exported but not in README's metrics table"
    assert sorted(set(table) - set(series)) == [], "in README's metrics table but not exported"
    assert {n: v for n, v in table.items() if series[n] != v} == {}, "README's type or labels differ"


def test_no_series_has_a_created_sample() -> None:
    assert "_created" not in observed().exposition().decode()
