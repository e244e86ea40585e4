"""Canary credentials against a hostile upstream: no fragment of any key reaches any sink.

A platform key, an org's BYOK key, a custom endpoint key, gateway keys, the
operator key and a key a client put in a query string are canaries. The
upstream (`support.echo_upstream`) quotes the key it receives in error
messages, `type`, `param` and `code`, in HTML pages, in an error envelope
inside a 200, and in an SSE error event after the first content; one
provider points at a closed port (a connect error). Then every sink is read
— client bodies, SSE streams, the provider health route (operator and org
admins), process logs, spans (`TURNOUT_TRACE_FILE`), every key and value in
Redis, and the attempt-record exports — and no 12-character window of any
canary may appear; client-facing texts carry no address or port either.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from cryptography.fernet import Fernet
from test_tenancy_security import _redis_contents

from support.echo_upstream import INTERNAL, EchoUpstream
from support.gateway import Gateway, start_gateway
from support.procs import Fleet, free_port, require_redis
from support.tenancy import Admin, wait_for

pytestmark = pytest.mark.integration

PLATFORM = "sk-platform-Zq81mXv0Lr5Tn2Wk9Yb3Hc6Jd4"
BYOK = "sk-byok-9c1e7f3a5b2d4e6f8a0b1c2d3e4f5a6b"
ENDPOINT = "ep-key-Ab12Cd34Ef56Gh78Ij90Kl12"
OPERATOR = "op-canary-operator-Qw3Er5Ty7Ui9"
ACME_ADMIN = "tk-canary-acme-admin-Xc4Vb6Nm8"
ACME_USER = "tk-canary-acme-user-Lk2Jh4Gf6D"
BETA_ADMIN = "tk-canary-beta-admin-Pz1Ox3Iw5"
BETA_USER = "tk-canary-beta-user-Mq7Wn9Eb2R"
BETA_STREAM = "tk-canary-beta-strm-Tg5Yh7Uj9K"
BETA_5XX = "tk-canary-beta-5xx-Vb3Nm5Qw7E"
IN_QUERY = "query-secret-Rf4Tg6Yh8Uj0Ik2"
CANARIES = [
    PLATFORM,
    BYOK,
    ENDPOINT,
    OPERATOR,
    ACME_ADMIN,
    ACME_USER,
    BETA_ADMIN,
    BETA_USER,
    BETA_STREAM,
    BETA_5XX,
    IN_QUERY,
]

CONFIG = """\
providers:
  leak-p: {{kind: openai_compatible, base_url: "{echo}/v1", api_key: "${{PLATFORM_CANARY}}"}}
  leak-b: {{kind: openai_compatible, base_url: "{echo}/v1", api_key: "${{PLATFORM_CANARY}}"}}
  leak-down: {{kind: openai_compatible, base_url: "http://127.0.0.1:{closed}/v1", api_key: "${{PLATFORM_CANARY}}"}}
models:
  p-401:      {{offers: [{{provider: leak-p, model: leak-401}}]}}
  p-prefix:   {{offers: [{{provider: leak-p, model: leak-prefix}}]}}
  p-html:     {{offers: [{{provider: leak-p, model: leak-html}}]}}
  p-envelope: {{offers: [{{provider: leak-p, model: leak-envelope}}]}}
  p-mid:      {{offers: [{{provider: leak-p, model: leak-midstream}}]}}
  b-401:      {{offers: [{{provider: leak-b, model: leak-401}}]}}
  b-mid:      {{offers: [{{provider: leak-b, model: leak-midstream}}]}}
  ok:         {{offers: [{{provider: leak-p, model: leak-ok}}]}}
  down:       {{offers: [{{provider: leak-down, model: leak-ok}}]}}
policy:
  retry: {{base_ms: 250, max_ms: 1000}}
gateway:
  records_max: 10000
egress: {{schemes: [http], ports: any}}
orgs:
  acme:
    provider_keys: {{leak-b: "${{BYOK_CANARY}}"}}
    keys:
      - {{name: admin, key: "${{ACME_ADMIN}}", admin: true}}
      - {{name: user, key: "${{ACME_USER}}"}}
  beta:
    custom_endpoints: {{ep: {{base_url: "{echo}/v1", api_key: "${{ENDPOINT_CANARY}}"}}}}
    keys:
      - {{name: admin, key: "${{BETA_ADMIN}}", admin: true}}
      - {{name: user, key: "${{BETA_USER}}", settings: {{reroutes: ["custom:ep:leak-401"]}}}}
      - {{name: stream, key: "${{BETA_STREAM}}", settings: {{reroutes: ["custom:ep:leak-midstream"]}}}}
      - {{name: fivexx, key: "${{BETA_5XX}}", settings: {{reroutes: ["custom:ep:leak-prefix"]}}}}
"""


@pytest.fixture(scope="module")
def gw() -> Iterator[tuple[Gateway, EchoUpstream]]:
    require_redis()
    echo = EchoUpstream()
    fleet = Fleet()
    env = {
        "TURNOUT_OPERATOR_KEY": OPERATOR,
        "TURNOUT_SECRET_KEY": Fernet.generate_key().decode(),
        "TURNOUT_SSRF_ALLOW": "127.0.0.1",
        "TURNOUT_METRICS_PORT": "0",
        "PLATFORM_CANARY": PLATFORM,
        "BYOK_CANARY": BYOK,
        "ENDPOINT_CANARY": ENDPOINT,
        "ACME_ADMIN": ACME_ADMIN,
        "ACME_USER": ACME_USER,
        "BETA_ADMIN": BETA_ADMIN,
        "BETA_USER": BETA_USER,
        "BETA_STREAM": BETA_STREAM,
        "BETA_5XX": BETA_5XX,
        "TURNOUT_TRACE_FILE": str(fleet.workdir / "spans-{service}.jsonl"),
        "OTEL_BSP_SCHEDULE_DELAY": "50",
    }
    try:
        yield start_gateway(fleet, CONFIG, env=env, echo=echo.url, closed=str(free_port())), echo
    finally:
        fleet.stop_all()
        echo.stop()


def _chat(gw: Gateway, key: str, model: str, *, stream: bool = False, params: dict[str, str] | None = None) -> str:
    body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    response = httpx.post(
        f"{gw.base_url}/v1/chat/completions",
        json=body,
        params=params,
        timeout=30,
        headers={"authorization": f"Bearer {key}"},
    )
    return f"{response.status_code} {dict(response.headers)} {response.text}"


def _leaks(text: str) -> list[str]:
    """Every canary of which a 12-character window occurs in `text`."""
    return [c for c in CANARIES if any(c[i : i + 12] in text for i in range(len(c) - 11))]


def test_no_canary_reaches_any_sink(gw: tuple[Gateway, EchoUpstream]) -> None:
    gateway, echo = gw
    client_texts = [
        _chat(gateway, ACME_USER, model, stream=stream)
        for model in ("p-401", "p-prefix", "p-prefix", "p-html", "p-envelope", "b-401", "down")
        for stream in (False, True)
    ]
    client_texts += [
        _chat(gateway, ACME_USER, "p-mid", stream=True),
        _chat(gateway, ACME_USER, "b-mid", stream=True),
        _chat(gateway, BETA_USER, "ok"),
        _chat(gateway, BETA_USER, "ok", stream=True),
        _chat(gateway, BETA_STREAM, "ok", stream=True),
        _chat(gateway, BETA_5XX, "ok"),
        _chat(gateway, ACME_USER, "ok", params={"api_key": IN_QUERY}),
    ]
    midstream = client_texts[-7]
    assert "data: {" in midstream and "Hello" in midstream and "mid-stream" in midstream  # the error event came
    assert "[DONE]" not in midstream
    health = {
        key: httpx.get(
            f"{gateway.base_url}/v1/health/providers", timeout=10, headers={"authorization": f"Bearer {key}"}
        ).text
        for key in (OPERATOR, ACME_ADMIN, BETA_ADMIN)
    }
    client_texts += list(health.values())
    for text in client_texts:
        assert not _leaks(text), text
        assert INTERNAL not in text and "10.20.30.40" not in text and "127.0.0.1" not in text, text
        assert echo.url.rsplit(":", 1)[1] not in text.replace(gateway.base_url, ""), text
    assert "leak-p/leak-prefix" in health[OPERATOR] and "[redacted]" in health[OPERATOR]  # the last error is kept
    exports: list[str] = []
    for admin in (ACME_ADMIN, BETA_ADMIN):
        api = Admin(gateway.base_url, admin)
        wait_for(lambda: "leak" in api.call("GET", "/logs/export").text, 10, "records exported")
        exports += [api.call("GET", "/logs/export", params={"format": f}).text for f in ("jsonl", "csv")]
    for text in exports:
        assert not _leaks(text)
    spans = ""
    for service in ("turnout-ingress", "turnout-worker"):
        path = gateway.fleet.workdir / f"spans-{service}.jsonl"
        wait_for(lambda: path.exists() and path.stat().st_size > 0, 10, f"{service} spans")
        spans += path.read_text()
    assert '"url.query"' in spans or '"http.target"' in spans  # the client's query string was seen, redacted
    assert not _leaks(spans)
    for proc in gateway.fleet.procs:
        assert not _leaks(proc.log()), f"a canary in the log of {proc.name}"
    assert not _leaks(_redis_contents(gateway.redis_url).decode("utf-8", "replace"))


def test_an_org_admin_sees_no_other_orgs_endpoint_or_shared_errors(gw: tuple[Gateway, EchoUpstream]) -> None:
    gateway, _ = gw
    _chat(gateway, BETA_5XX, "ok")
    _chat(gateway, ACME_USER, "p-prefix")

    def rows(key: str) -> dict[str, dict[str, Any]]:
        data = httpx.get(
            f"{gateway.base_url}/v1/health/providers", headers={"authorization": f"Bearer {key}"}, timeout=10
        ).json()["data"]
        return {row["target"]: row for row in data}

    beta, acme = rows(BETA_ADMIN), rows(ACME_ADMIN)
    assert "custom:beta:ep/leak-401" in beta and "500" in beta["custom:beta:ep/leak-prefix"]["last_error"]
    assert not any(t.startswith("custom:") for t in acme)
    assert all(row["last_error"] is None for t, row in beta.items() if not t.startswith("custom:"))
    assert all(row["last_error"] is None for row in acme.values())
    assert rows(OPERATOR)["leak-p/leak-prefix"]["last_error"]
    assert (
        httpx.get(
            f"{gateway.base_url}/v1/health/providers", timeout=10, headers={"authorization": f"Bearer {ACME_USER}"}
        ).status_code
        == 403
    )
