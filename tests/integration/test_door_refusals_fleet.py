"""Door refusals are stored and readable (`GET /admin/v1/refusals`), against a real fleet (redis-server,
simulator, ingress, worker) with the official openai SDK as the client: each refusal is a row under its
route with its status and code, and the caller's org and key once known; an org admin reads only its own
org's rows; a flood of unauthenticated refusals evicts no org's rows and no attempt record, and stores
at most the per-process cap."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, cast

import httpx
import openai
import pytest
import redis

from support.gateway import KEY, OPERATOR, SIM_PROVIDERS, Gateway, running_gateway
from support.procs import wait_until
from turnout.state import keys
from turnout_ingress.guard.refusal_writer import UNIDENTIFIED_ROWS_PER_S

pytestmark = pytest.mark.integration

RPM1 = "tk-test-rpm1-000000000001"
ACME_ADMIN = "tk-test-acme-admin-000001"
BETA_ADMIN = "tk-test-beta-admin-000001"
MAX_BODY = 65536
CONFIG = (
    SIM_PROVIDERS
    + """\
models:
  ok: {{offers: [{{provider: sim-a, model: ok}}]}}
gateway:
  max_body_bytes: 65536
orgs:
  acme:
    keys:
      - {{name: main, key: {key}}}
      - {{name: rpm1, key: {rpm1}, settings: {{limits: {{rpm: 1}}}}}}
      - {{name: admin, key: {acme_admin}, admin: true}}
  beta:
    keys:
      - {{name: admin, key: {beta_admin}, admin: true}}
"""
)


@pytest.fixture(scope="module")
def gw() -> Iterator[Gateway]:
    with running_gateway(
        CONFIG,
        env={"TURNOUT_OPERATOR_KEY": OPERATOR},
        key=KEY,
        rpm1=RPM1,
        acme_admin=ACME_ADMIN,
        beta_admin=BETA_ADMIN,
    ) as gateway:
        yield gateway


def _read(gw: Gateway, admin_key: str, **params: str) -> httpx.Response:
    return httpx.get(
        f"{gw.base_url}/admin/v1/refusals", params=params, headers={"authorization": f"Bearer {admin_key}"}
    )


def _row(gw: Gateway, admin_key: str, request_id: str, **params: str) -> dict[str, Any]:
    """The stored row of `request_id`, waited for (rows are flushed in the background)."""
    found: dict[str, Any] = {}

    def stored() -> bool:
        answer = _read(gw, admin_key, limit="1000", **params)
        assert answer.status_code == 200, answer.text
        found.update(next((r for r in answer.json()["data"] if r["request_id"] == request_id), {}))
        return bool(found)

    wait_until(stored, 10.0, f"the refusal row of {request_id}")
    return found


def _xlen(store: redis.Redis, key: str) -> int:
    return cast(int, store.xlen(key))


def _records(store: redis.Redis) -> list[Any]:
    return cast(list[Any], store.xrange(keys.RECORDS_STREAM))


def _shape(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row["method"], row["route"], row["status"], row["code"], row["org"], row["key"])


def test_an_unknown_path_is_a_row_under_its_own_label_without_a_caller(gw: Gateway) -> None:
    answer = httpx.post(f"{gw.base_url}/v1/no/such/path/secret-123", json={})
    assert answer.status_code == 404
    row = _row(gw, OPERATOR, answer.headers["x-request-id"], org="-")
    assert _shape(row) == ("POST", "other", 404, "unknown_route", None, None)
    assert "secret-123" not in str(row)  # never the raw path
    images = httpx.post(f"{gw.base_url}/v1/images/generations", json={})
    assert _row(gw, OPERATOR, images.headers["x-request-id"], org="-", route="/v1/images")["status"] == 404


def test_a_401_is_a_row_of_the_callers_not_identified(gw: Gateway) -> None:
    with pytest.raises(openai.AuthenticationError) as caught:
        gw.client("tk-test-wrong-00000000001").chat.completions.create(
            model="ok", messages=[{"role": "user", "content": "x"}]
        )
    row = _row(gw, OPERATOR, caught.value.response.headers["x-request-id"], org="-", status="401")
    assert _shape(row) == ("POST", "/v1/chat/completions", 401, "invalid_api_key", None, None)


def test_a_400_body_error_is_a_row_of_the_callers_org_and_key(gw: Gateway) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        gw.client().chat.completions.create(model="ok", messages=[{"role": "bogus", "content": "x"}])  # type: ignore[misc,list-item]
    row = _row(gw, ACME_ADMIN, caught.value.response.headers["x-request-id"])
    assert _shape(row) == ("POST", "/v1/chat/completions", 400, caught.value.code or "none", "acme", "main")


def test_a_429_of_a_keys_rpm_is_a_row_of_the_callers_org_and_key(gw: Gateway) -> None:
    client = gw.client(RPM1)
    client.chat.completions.create(model="ok", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model="ok", messages=[{"role": "user", "content": "x"}])
    row = _row(gw, ACME_ADMIN, caught.value.response.headers["x-request-id"], status="429")
    assert _shape(row) == ("POST", "/v1/chat/completions", 429, caught.value.code, "acme", "rpm1")


def test_a_413_is_a_row_of_the_callers_org_and_key(gw: Gateway) -> None:
    with pytest.raises(openai.APIStatusError) as caught:
        gw.client().chat.completions.create(model="ok", messages=[{"role": "user", "content": "x" * (MAX_BODY + 1)}])
    assert caught.value.status_code == 413
    row = _row(gw, ACME_ADMIN, caught.value.response.headers["x-request-id"], status="413")
    assert _shape(row)[1:] == ("/v1/chat/completions", 413, caught.value.code or "none", "acme", "main")


def test_an_org_admin_reads_only_its_own_orgs_rows(gw: Gateway) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        gw.client().chat.completions.create(model="ok", messages=[{"role": "bogus", "content": "y"}])  # type: ignore[misc,list-item]
    rid = caught.value.response.headers["x-request-id"]
    _row(gw, ACME_ADMIN, rid)
    for asked in ("acme", "-", "nope"):
        refused = _read(gw, BETA_ADMIN, org=asked)
        assert (refused.status_code, refused.json()["error"]["param"]) == (404, "org"), asked
    seen = _row(gw, BETA_ADMIN, refused.headers["x-request-id"])  # the admin API's refusals are rows too
    assert _shape(seen) == ("GET", "admin", 404, "not_found", "beta", "admin")
    own = _read(gw, BETA_ADMIN)
    assert own.status_code == 200 and own.json()["org"] == "beta"
    assert all(r["org"] == "beta" for r in own.json()["data"])
    operator = _read(gw, OPERATOR, org="acme", status="400")
    assert any(r["request_id"] == rid for r in operator.json()["data"])
    assert _read(gw, OPERATOR).status_code == 400  # the operator names the org
    bad = _read(gw, ACME_ADMIN, route="/v1/no/such/label")
    assert (bad.status_code, bad.json()["error"]["param"], bad.json()["error"]["code"]) == (
        400,
        "route",
        "invalid_value",
    )


def test_a_flood_of_unauthenticated_refusals_evicts_no_orgs_rows_nor_any_attempt_record(gw: Gateway) -> None:
    with redis.Redis.from_url(gw.redis_url) as store:
        _flood(gw, store)


def _flood(gw: Gateway, store: redis.Redis) -> None:
    served = gw.client().chat.completions.with_raw_response.create(
        model="ok", messages=[{"role": "user", "content": "kept"}]
    )
    with pytest.raises(openai.BadRequestError) as caught:
        gw.client().chat.completions.create(model="ok", messages=[{"role": "bogus", "content": "z"}])  # type: ignore[misc,list-item]
    kept = caught.value.response.headers["x-request-id"]
    _row(gw, ACME_ADMIN, kept)
    wait_until(lambda: _xlen(store, keys.RECORDS_STREAM) >= 2, 10.0, "the served request's attempt records")
    records_before = _records(store)
    acme_before = _xlen(store, keys.refusals_key("acme"))
    unidentified_before = _xlen(store, keys.refusals_key(None))

    started = time.monotonic()
    with httpx.Client(base_url=gw.base_url) as flood:
        for i in range(2000):
            if i % 2:
                assert flood.post("/v1/chat/completions", json={}).status_code == 401
            else:
                assert flood.post(f"/v1/garbage/{i}", content=b"x").status_code == 404
    elapsed_s = time.monotonic() - started
    time.sleep(1.0)  # the last flush (every 0.25 s)

    stored = _xlen(store, keys.refusals_key(None)) - unidentified_before
    bound = UNIDENTIFIED_ROWS_PER_S * (int(elapsed_s + 1.0) + 1) * 2  # two (route, status, code) keys
    print(f"flood: 2000 refusals in {elapsed_s:.2f} s, {stored} rows stored (bound {bound})")
    assert 0 < stored <= bound
    assert _xlen(store, keys.refusals_key("acme")) == acme_before
    assert any(r["request_id"] == kept for r in _read(gw, ACME_ADMIN, limit="1000").json()["data"])
    assert _records(store)[: len(records_before)] == records_before  # none evicted
    assert served.headers["x-request-id"] in str(records_before)
    metrics = httpx.get(f"{gw.base_url}/metrics").text
    capped = next(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith('turnout_refusal_rows_dropped_total{reason="capped"}')
    )
    assert capped >= 2000 - stored
