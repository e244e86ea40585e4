"""A configuration file is the source of truth for what it wrote: a rollback applies, API edits stay.

Real redis-server and `turnout ingress` processes started one after the other
on one Redis, each with a file, as an operator deploys and rolls back.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from support.procs import Fleet, require_redis
from support.tenancy import Admin

pytestmark = pytest.mark.integration

OPERATOR = "op-test-rollback-operator-0001"
KEY_A = "tk-rollback-file-a-key-0001"
KEY_B = "tk-rollback-file-b-key-0001"
FILE = """\
providers:
  up: {{kind: openai_compatible, base_url: "http://127.0.0.1:9/v1", api_key: sk-up-0001}}
models:
  {model}: {{offers: [{{provider: up, model: {upstream}}}]}}
orgs:
  acme:
    keys: [{{name: {name}, key: {key}}}]
"""


@pytest.fixture
def fleet() -> Iterator[Fleet]:
    require_redis()
    started = Fleet()
    try:
        yield started
    finally:
        started.stop_all()


def _write(fleet: Fleet, file_name: str, **values: str) -> Path:
    path = fleet.workdir / file_name
    path.write_text(FILE.format(**values))
    return path


def _served(fleet: Fleet, config: Path, redis_url: str) -> tuple[dict[str, int], list[str], str]:
    """Start an ingress on `config`, read what it serves, stop it: each key's status on
    `/v1/models`, the model ids it lists, and its log."""
    proc, base = fleet.ingress(config, redis_url, env={"TURNOUT_OPERATOR_KEY": OPERATOR})
    try:
        statuses = {
            key: httpx.get(f"{base}/v1/models", headers={"authorization": f"Bearer {key}"}, timeout=5).status_code
            for key in (KEY_A, KEY_B)
        }
        good = next(k for k, s in statuses.items() if s == 200)
        listed = httpx.get(f"{base}/v1/models", headers={"authorization": f"Bearer {good}"}, timeout=5).json()
        return statuses, sorted(m["id"] for m in listed["data"]), proc.log()
    finally:
        proc.stop()


def test_a_rollback_to_an_earlier_file_serves_the_earlier_values(fleet: Fleet) -> None:
    _, redis_url = fleet.redis()
    earlier = _write(fleet, "a.yaml", model="alpha", upstream="a", name="a", key=KEY_A)
    later = _write(fleet, "b.yaml", model="beta", upstream="b", name="b", key=KEY_B)
    assert _served(fleet, earlier, redis_url)[:2] == ({KEY_A: 200, KEY_B: 401}, ["alpha"])
    assert _served(fleet, later, redis_url)[:2] == ({KEY_A: 401, KEY_B: 200}, ["beta"])
    statuses, models, log = _served(fleet, earlier, redis_url)  # the rollback
    assert (statuses, models) == ({KEY_A: 200, KEY_B: 401}, ["alpha"])
    assert "Traceback" not in log and "removed (no longer in the file): models.beta" in log


def test_an_api_edit_newer_than_the_file_is_kept_and_named_and_api_models_stay(fleet: Fleet) -> None:
    _, redis_url = fleet.redis()
    first = _write(fleet, "a.yaml", model="alpha", upstream="a", name="a", key=KEY_A)
    proc, base = fleet.ingress(first, redis_url, env={"TURNOUT_OPERATOR_KEY": OPERATOR})
    operator = Admin(base, OPERATOR)
    edit = operator.call("PUT", "/catalog/models/alpha", {"offers": [{"provider": "up", "model": "by-api"}]})
    made = operator.call("PUT", "/catalog/models/extra", {"offers": [{"provider": "up", "model": "x"}]})
    assert edit.status_code == 200 and made.status_code == 200, (edit.text, made.text)
    proc.stop()
    changed = _write(fleet, "a2.yaml", model="alpha", upstream="a2", name="a", key=KEY_A)
    statuses, models, log = _served(fleet, changed, redis_url)
    assert statuses[KEY_A] == 200 and models == ["alpha", "extra"]
    assert "kept the admin API's edits of models.alpha over the values in" in log
    proc, base = fleet.ingress(changed, redis_url, env={"TURNOUT_OPERATOR_KEY": OPERATOR})
    catalog = Admin(base, OPERATOR).call("GET", "/catalog").json()
    assert catalog["models"]["alpha"]["offers"][0]["model"] == "by-api"


OTHER = """\
providers:
  other: {kind: openai_compatible, base_url: "http://127.0.0.1:9/v1", api_key: sk-other-0001}
models:
  gamma: {offers: [{provider: other, model: g}]}
  delta: {offers: [{provider: other, model: d}]}
orgs:
  acme:
    settings: {fallbacks: {gamma: [delta]}}
    keys: [{name: b, key: %s}]
"""


def test_a_file_the_kept_catalog_cannot_serve_refuses_the_start_in_one_line(fleet: Fleet) -> None:
    _, redis_url = fleet.redis()
    first = _write(fleet, "a.yaml", model="alpha", upstream="a", name="a", key=KEY_A)
    proc, base = fleet.ingress(first, redis_url, env={"TURNOUT_OPERATOR_KEY": OPERATOR})
    edit = Admin(base, OPERATOR).call("PUT", "/catalog/models/alpha", {"offers": [{"provider": "up", "model": "api"}]})
    assert edit.status_code == 200, edit.text
    proc.stop()
    other = fleet.workdir / "other.yaml"
    other.write_text(OTHER % KEY_B)  # drops provider `up`, which the kept API edit of `alpha` offers
    proc, _ = fleet.ingress(other, redis_url, ready=False)
    assert proc.popen.wait(timeout=60) == 2
    log = proc.log()
    assert "Traceback" not in log
    assert "kept the admin API's edits of models.alpha" in log
    assert "configuration: the orgs of this file cannot be written to Redis: orgs.acme.settings.fallbacks" in log
