"""`PUT /admin/v1/catalog/providers/{provider}` carries the provider's active probe: left out keeps
the stored one, `null` removes it, a value replaces it (README "Active probes")."""

from __future__ import annotations

import pytest

from turnout.config.providers import ProbeConfig
from turnout.stored.catalog import ProviderEntry
from turnout.tenancy.admin import AdminError, decode
from turnout_ingress.admin.catalog import ProviderPut, _probe_after

STORED = ProviderEntry(
    kind="openai_compatible", base_url="https://api.example/v1", probe=ProbeConfig(active=True, interval_s=2.0)
)
BASE = b'"kind": "openai_compatible", "base_url": "https://api.example/v1"'


@pytest.mark.parametrize(
    ("body", "after"),
    [
        (b"{" + BASE + b"}", ProbeConfig(active=True, interval_s=2.0)),
        (b"{" + BASE + b', "probe": null}', None),
        (b"{" + BASE + b', "probe": {"active": true, "interval_s": 10}}', ProbeConfig(active=True, interval_s=10.0)),
    ],
    ids=["left-out-keeps", "null-removes", "value-replaces"],
)
def test_a_provider_write_keeps_removes_or_replaces_its_probe(body: bytes, after: ProbeConfig | None) -> None:
    assert _probe_after(decode(body, ProviderPut, "providers.p"), STORED) == after


def test_a_new_provider_without_a_probe_has_none() -> None:
    assert _probe_after(decode(b"{" + BASE + b"}", ProviderPut, "providers.p"), None) is None


def test_a_probe_interval_out_of_range_is_refused_naming_it() -> None:
    with pytest.raises(AdminError) as info:
        decode(b"{" + BASE + b', "probe": {"interval_s": 0.1}}', ProviderPut, "providers.p")
    assert info.value.param == "providers.p.probe.interval_s"
