"""OpenAI-compatible endpoints behind their own auth, through the whole fleet with the official
openai SDK as the client: a provider's `auth: {header, scheme}` and `headers:` (a `${VAR}`
value) reach the simulator's `/keyed/v1/` routes (the key alone in `api-key`), a provider
without them sends a Bearer key such an endpoint refuses (401, said to the client), the admin API stores a provider's header
values sealed and shows only their tails, and a tenant's custom endpoint registered with its
own auth and headers is called with them."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from support.gateway import KEY, Gateway, running_gateway
from support.tenancy import Admin, tenancy_env, wait_for

pytestmark = pytest.mark.integration

TEAM_HEADER = "team-a-0001"
"""The value of `X-Team` given through `${TEST_TEAM_HEADER}`."""

CONFIG = """\
providers:
  vllm: {{kind: openai_compatible, base_url: "{sim}/keyed/v1", api_key: vllm-key-0001,
          auth: {{header: api-key, scheme: ""}}, headers: {{X-Team: "${{TEST_TEAM_HEADER}}"}}}}
  plain: {{kind: openai_compatible, base_url: "{sim}/keyed/v1", api_key: plain-key-0001}}
models:
  keyed:
    offers: [{{provider: vllm, model: keyed-model}}]
  keyed-emb:
    type: embedding
    offers: [{{provider: vllm, model: keyed-emb}}]
  unkeyed:
    offers: [{{provider: plain, model: plain-model}}]
policy:
  retry: {{base_ms: 250, max_ms: 4000}}
egress: {{schemes: [http], ports: any}}   # the simulator listens on plain http, any free port
breaker: {{consecutive_failures: 1000000, sole_consecutive_failures: 1000000, failure_rate: 2.0, sole_failure_rate: 2.0}}
orgs:
  acme:
    keys:
      - {{name: main, key: {key}}}
      - {{name: admin, key: {admin}, admin: true}}
"""
ACME_ADMIN = "tk-test-provider-auth-admin-01"

HELLO: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hello"}]


def _fingerprint(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:8]


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    return {**tenancy_env(), "TEST_TEAM_HEADER": TEAM_HEADER}


@pytest.fixture(scope="module")
def gw(env: dict[str, str]) -> Iterator[Gateway]:
    with running_gateway(CONFIG, env=env, key=KEY, admin=ACME_ADMIN) as gateway:
        yield gateway


def test_the_key_goes_in_the_providers_own_header_with_its_extra_headers(gw: Gateway) -> None:
    raw = gw.client().chat.completions.with_raw_response.create(model="keyed", messages=HELLO, max_tokens=3)
    assert raw.parse().choices[0].message.content == "tok0 tok1 tok2"
    [entry] = gw.sim_log("keyed-model")
    assert entry["status"] == 200
    assert entry["auth_fingerprint"] == _fingerprint("vllm-key-0001")  # `api-key: <key>`, no scheme
    assert entry["received"] == {"headers": {"x-team": TEAM_HEADER}}


def test_streams_and_embeddings_carry_them_too(gw: Gateway) -> None:
    stream = gw.client().chat.completions.create(model="keyed", messages=HELLO, max_tokens=2, stream=True)
    assert "".join(c.delta.content or "" for chunk in stream for c in chunk.choices) == "tok0 tok1"
    vectors = gw.client().embeddings.create(model="keyed-emb", input=["a", "b"])
    assert len(vectors.data) == 2
    for model in ("keyed-model", "keyed-emb"):
        assert {str(e["received"]) for e in gw.sim_log(model)} == {str({"headers": {"x-team": TEAM_HEADER}})}


def test_without_auth_the_key_goes_as_bearer_and_such_an_endpoint_refuses_it(gw: Gateway) -> None:
    with pytest.raises(openai.AuthenticationError) as refused:  # the operator's key is wrong for it: said, not hidden
        gw.client().chat.completions.create(model="unkeyed", messages=HELLO)
    assert "plain" in refused.value.message
    [entry] = gw.sim_log("plain-model")
    assert entry["status"] == 401 and entry["auth_fingerprint"] is None  # no `api-key` header was sent


def test_the_admin_api_seals_a_providers_headers_and_refuses_a_reserved_one(gw: Gateway, env: dict[str, str]) -> None:
    operator = Admin(gw.base_url, env["TURNOUT_OPERATOR_KEY"])
    spec = {
        "kind": "openai_compatible",
        "base_url": f"{gw.sim_url}/keyed/v1",
        "api_key": "added-key-0001",
        "auth": {"header": "api-key", "scheme": ""},
    }
    refused = operator.call("PUT", "/catalog/providers/added", {**spec, "headers": {"Content-Type": "x"}})
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["param"] == "providers.added.headers.Content-Type"
    empty = operator.call("PUT", "/catalog/providers/added", {**spec, "headers": {"X-A": ""}})
    assert empty.status_code == 400 and empty.json()["error"]["param"] == "providers.added.headers.X-A", empty.text
    wrong_kind = operator.call("PUT", "/catalog/providers/added", {**spec, "kind": "openai"})
    assert wrong_kind.status_code == 400 and wrong_kind.json()["error"]["param"] == "providers.added.auth"
    made = operator.call("PUT", "/catalog/providers/added", {**spec, "headers": {"X-Tenant-Route": "route-secret-77"}})
    assert made.status_code == 200, made.text
    shown = made.json()["providers"]["added"]
    assert shown["auth"] == {"header": "api-key", "scheme": ""}
    assert shown["headers"]["X-Tenant-Route"]["source"] == "sealed"
    assert "route-secret-77" not in made.text
    put = operator.call("PUT", "/catalog/models/added-m", {"offers": [{"provider": "added", "model": "added-model"}]})
    assert put.status_code == 200, put.text

    def served() -> bool:
        try:
            gw.client().chat.completions.create(model="added-m", messages=HELLO)
        except openai.APIStatusError:
            return False
        return True

    wait_for(served, 2.0, "a model on the provider added through the API")
    served_entries = [e for e in gw.sim_log("added-model") if e["status"] == 200]
    assert served_entries[-1]["received"] == {"headers": {"x-tenant-route": "route-secret-77"}}


def test_a_tenants_custom_endpoint_is_called_with_its_own_auth_and_headers(gw: Gateway) -> None:
    admin = Admin(gw.base_url, ACME_ADMIN)
    endpoint = {
        "base_url": f"{gw.sim_url}/keyed/v1",
        "api_key": "tenant-endpoint-key-01",
        "auth": {"header": "api-key", "scheme": ""},
        "headers": {"X-Project": "proj-secret-42"},
    }
    bad = admin.call("PUT", "/orgs/acme/custom-endpoints/mine", {**endpoint, "headers": {"Bad Name": "x"}})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "headers.Bad Name", bad.text
    put = admin.call("PUT", "/orgs/acme/custom-endpoints/mine", endpoint)
    assert put.status_code == 200, put.text
    view = put.json()["custom_endpoint"]
    assert view["auth"] == {"header": "api-key", "scheme": ""} and set(view["headers"]) == {"X-Project"}
    assert "proj-secret-42" not in put.text
    user = admin.call(
        "POST", "/orgs/acme/keys", {"name": "endpoint-user", "settings": {"reroutes": ["custom:mine:mine-model"]}}
    )
    assert user.status_code == 201, user.text
    client = gw.client(user.json()["secret"])

    def served() -> bool:
        try:
            raw = client.chat.completions.with_raw_response.create(model="keyed", messages=HELLO)
        except openai.APIStatusError:
            return False
        return raw.headers["x-turnout-provider"] == "custom:acme:mine"

    wait_for(served, 2.0, "the tenant's custom endpoint")
    ok = [e for e in gw.sim_log("mine-model") if e["status"] == 200]
    assert ok[-1]["auth_fingerprint"] == _fingerprint("tenant-endpoint-key-01")
    assert ok[-1]["received"] == {"headers": {"x-project": "proj-secret-42"}}
