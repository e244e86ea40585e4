"""Bounded metrics (#40 item 6): no tenant-chosen string is a label, and each metric holds a bounded number of label sets."""

from __future__ import annotations

from turnout.observability.metrics import OTHER, Metrics, model_label, target_label


def test_a_custom_endpoints_model_is_never_a_label_and_a_catalog_target_is_labelled_by_its_catalog_id() -> None:
    assert model_label("custom:acme:ep", '=HYPERLINK("x")') == OTHER
    assert model_label("", "custom:ep:anything-the-tenant-wrote") == OTHER
    assert model_label("openai", "gpt-5") == "gpt-5"
    assert target_label("custom:acme:ep/tenant-model-0001") == "custom:acme:ep/other"
    assert target_label("openai/gpt-5-2025-08-07") == "openai/gpt-5-2025-08-07"


def test_past_the_cap_every_new_label_set_is_counted_under_other() -> None:
    metrics = Metrics(cap=3)
    for i in range(10_000):
        metrics.bounded.child(metrics.attempts, provider="p", model=f"m{i}", kind="success").inc()
    reg = metrics.registry
    kept = [
        reg.get_sample_value("turnout_attempts_total", {"provider": "p", "model": f"m{i}", "kind": "success"})
        for i in range(3)
    ]
    assert kept == [1.0, 1.0, 1.0]
    assert reg.get_sample_value("turnout_attempts_total", {"provider": "p", "model": "m3", "kind": "success"}) is None
    assert reg.get_sample_value("turnout_attempts_total", dict.fromkeys(("provider", "model", "kind"), OTHER)) == 9_997
    metrics.bounded.child(metrics.attempts, provider="p", model="m0", kind="success").inc()  # a known set still counts
    assert reg.get_sample_value("turnout_attempts_total", {"provider": "p", "model": "m0", "kind": "success"}) == 2.0
    assert len(metrics.exposition()) < 5_000
