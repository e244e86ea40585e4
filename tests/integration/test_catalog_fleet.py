"""The catalog lives in Redis: an admin edit reaches every ingress and worker within 2 s, no restart.

Real redis-server, simulator, one ingress and two arq workers, the official
`openai` SDK. Each figure is measured from the admin write's answer to the
first moment every path agrees (polled every 20 ms, deadline 2 s: the
documented propagation bound, README "Catalog: models and providers at run time").
"""

from __future__ import annotations

import concurrent.futures
import json
from collections.abc import Iterator

import openai
import pytest

from support.gateway import SIM_PROVIDERS, Gateway, start_gateway
from support.procs import Fleet, require_redis
from support.tenancy import Admin, tenancy_env, wait_for
from turnout_sim.attempt_log import auth_fingerprint

pytestmark = pytest.mark.integration

KEY = "tk-test-catalog-000000001"
BOUND_S = 2.0
CONFIG = (
    SIM_PROVIDERS
    + """\
models:
  base: {{offers: [{{provider: sim-a, model: base}}]}}
orgs:
  acme:
    squads:
      spare: {{settings: {{fallbacks: [base]}}}}   # no key in it: names `base` without routing anything
    keys:
      - {{name: main, key: {key}}}
"""
)


PROVIDER_KEY = "sk-my-provider-key-from-env-0001"


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    return {**tenancy_env(), "MY_PROVIDER_KEY": PROVIDER_KEY}


@pytest.fixture(scope="module")
def gw(env: dict[str, str]) -> Iterator[Gateway]:
    require_redis()
    fleet = Fleet()
    try:
        gateway = start_gateway(fleet, CONFIG, workers=2, env=env, key=KEY)
        yield gateway
        gateway.close()
    finally:
        fleet.stop_all()


@pytest.fixture
def operator(gw: Gateway, env: dict[str, str]) -> Admin:
    return Admin(gw.base_url, env["TURNOUT_OPERATOR_KEY"])


def _client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key=KEY, max_retries=0, timeout=10)


def _queued(client: openai.OpenAI, model: str) -> int:
    try:
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])
        return 200
    except openai.APIStatusError as exc:
        return exc.status_code


def _streamed(client: openai.OpenAI, model: str) -> int:
    try:
        with client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "hi"}], stream=True
        ) as stream:
            for _ in stream:
                pass
        return 200
    except openai.APIStatusError as exc:
        return exc.status_code


def _workers_at(gw: Gateway, version: int) -> bool:
    """Every worker logged that catalog `version` is in force."""
    line = f"catalog: version {version} in force"
    workers = [p for p in gw.fleet.procs if p.name.startswith("worker-")]
    return len(workers) == 2 and all(line in p.log() for p in workers)


def _everywhere(gw: Gateway, model: str, status: int, burst: int = 8) -> bool:
    """`model` answers `status` streamed and on `burst` concurrent queued requests (both workers busy)."""
    with _client(gw.base_url) as client, concurrent.futures.ThreadPoolExecutor(burst) as pool:
        if _streamed(client, model) != status:
            return False
        return all(s == status for s in pool.map(lambda _: _queued(client, model), range(burst)))


def test_a_model_added_then_removed_through_the_admin_api_reaches_every_process_within_2_s(
    gw: Gateway, operator: Admin
) -> None:
    with _client(gw.base_url) as client:
        assert _queued(client, "added") == 404
    put = operator.call("PUT", "/catalog/models/added", {"offers": [{"provider": "sim-b", "model": "added-b"}]})
    assert put.status_code == 200, put.text
    version = put.json()["version"]
    added_s = wait_for(
        lambda: _workers_at(gw, version) and _everywhere(gw, "added", 200),
        BOUND_S,
        "the added model served by the ingress and both workers",
    )
    served = [e for e in gw.sim_log("added-b")]
    assert len(served) >= 9  # one stream and eight queued jobs reached the upstream
    print(f"catalog add: every path served `added` {added_s:.3f} s after the admin write")

    gone = operator.call("DELETE", "/catalog/models/added")
    assert gone.status_code == 200, gone.text
    removed_version = gone.json()["version"]
    removed_s = wait_for(
        lambda: _workers_at(gw, removed_version) and _everywhere(gw, "added", 404),
        BOUND_S,
        "the removed model answering 404 everywhere",
    )
    print(f"catalog remove: 404 everywhere {removed_s:.3f} s after the admin write")


def test_a_model_id_holding_a_slash_is_written_served_and_deleted_through_the_api(gw: Gateway, operator: Admin) -> None:
    """Model ids may hold `/` (`meta-llama/llama-3`, as the file allows): the admin routes take the
    id whole, written as is or percent-encoded (as `turnout admin catalog` sends it)."""
    put = operator.call(
        "PUT", "/catalog/models/meta-llama/llama-3", {"offers": [{"provider": "sim-b", "model": "ll3"}]}
    )
    assert put.status_code == 200, put.text
    assert "meta-llama/llama-3" in put.json()["models"]
    version = put.json()["version"]
    wait_for(lambda: _workers_at(gw, version), BOUND_S, "every worker on the catalog with the model")
    with _client(gw.base_url) as client:
        wait_for(lambda: _queued(client, "meta-llama/llama-3") == 200, BOUND_S, "the model served")
    gone = operator.call("DELETE", "/catalog/models/meta-llama%2Fllama-3")
    assert gone.status_code == 200, gone.text
    assert "meta-llama/llama-3" not in gone.json()["models"]
    again = operator.call("DELETE", "/catalog/models/meta-llama/llama-3")
    assert again.status_code == 404 and "meta-llama/llama-3" in again.json()["error"]["message"], again.text


def test_a_restarted_ingress_keeps_a_model_the_api_created(gw: Gateway, operator: Admin, env: dict[str, str]) -> None:
    put = operator.call("PUT", "/catalog/models/kept", {"offers": [{"provider": "sim-a", "model": "kept"}]})
    assert put.status_code == 200, put.text
    wait_for(lambda: _everywhere(gw, "kept", 200, burst=2), BOUND_S, "the new model on the first ingress")
    stale = gw.fleet.workdir / "turnout.yaml"  # the file every process started with: no `kept`
    first = next(p for p in gw.fleet.procs if p.name.startswith("ingress-") and p.alive())
    first.stop()
    port = int(gw.base_url.rsplit(":", 1)[1])
    proc, restarted = gw.fleet.ingress(stale, gw.redis_url, port=port, env=env)  # the same ingress, restarted
    with _client(restarted) as client:
        assert _queued(client, "kept") == 200  # ... and the workers, which kept running, agree
        assert _streamed(client, "kept") == 200
    assert "models.kept" not in proc.log()  # created through the API: the file neither removes nor names it
    assert operator.call("GET", "/catalog").json()["models"].keys() >= {"base", "kept"}


def test_a_bad_edit_is_refused_naming_the_field_and_changes_nothing(gw: Gateway, operator: Admin) -> None:
    before = operator.call("GET", "/catalog").json()
    cases = [
        (
            "PUT",
            "/catalog/models/bad",
            {"offers": [{"provider": "nope", "model": "x"}]},
            "models.bad.offers[0].provider",
        ),
        ("PUT", "/catalog/models/bad", {"offers": [{"provider": "sim-a"}]}, "models.bad.offers[0]"),
        ("PUT", "/catalog/models/bad", {"offers": []}, "models.bad.offers"),
        ("PUT", "/catalog/providers/p", {"kind": "openai", "base_url": "ftp://x"}, "providers.p.base_url"),
        ("PUT", "/catalog/providers/p", {"kind": "nope", "base_url": "https://x"}, "providers.p.kind"),
        (
            "PUT",
            "/catalog/providers/p",
            {"kind": "openai", "base_url": "https://x", "api_key": "sk-x-0001", "api_key_env": "X"},
            "api_key_env",
        ),
        ("PUT", "/catalog/providers/p", {"kind": "openai", "base_url": "https://x", "api_key": "sk\nx"}, "api_key"),
        ("PUT", "/catalog/providers/p", {"kind": "openai", "base_url": "https://x", "api_key": ""}, "api_key"),
        ("PUT", "/catalog/models/w\u2603", {"offers": [{"provider": "sim-a", "model": "w"}]}, "models.'w\u2603'"),
        (
            "PUT",
            "/catalog/models/bad",
            {"offers": [{"provider": "sim-a", "model": "w\u2603"}]},
            "models.bad.offers[0].model",
        ),
        (
            "PUT",
            "/catalog/models/bad",
            {"offers": [{"provider": "sim-a", "model": "x", "input_usd_per_mtok": -1}]},
            "models.bad.offers[0].input_usd_per_mtok",
        ),
        ("DELETE", "/catalog/providers/sim-a", None, "models.base.offers[0].provider"),
        ("DELETE", "/catalog/models/never", None, "model"),
        (
            "PUT",
            "/catalog/providers/p",
            {"kind": "openai", "base_url": "https://x/" + "a" * 100_000},
            "providers.p.base_url",
        ),
        (
            "PUT",
            "/catalog/providers/p",
            {"kind": "openai", "base_url": "https://x", "api_key_env": "A" * 5000},
            "api_key_env",
        ),
        ("DELETE", "/catalog/models/" + "Q" * 60_000, None, "model"),
    ]
    for method, path, body, param in cases:
        answer = operator.call(method, path, body)
        assert answer.status_code in (400, 404, 409), (path, answer.text)
        error = answer.json()["error"]
        assert error["param"] == param, (path, error)
        assert len(answer.content) < 2000, (path[:80], len(answer.content))  # never the whole input echoed
    assert operator.call("GET", "/catalog").json() == before
    user = Admin(gw.base_url, KEY).call("PUT", "/catalog/models/x", {"offers": [{"provider": "sim-a", "model": "x"}]})
    assert user.status_code in (401, 403)


def test_a_delete_of_what_is_still_used_is_a_409_listing_every_use(operator: Admin) -> None:
    before = operator.call("GET", "/catalog").json()
    model = operator.call("DELETE", "/catalog/models/base")
    assert model.status_code == 409, model.text
    assert model.json()["error"] == {
        "message": "model `base` is still used by: orgs.acme.squads.spare.settings.fallbacks[0]; remove those first",
        "type": "conflict_error",
        "param": "orgs.acme.squads.spare.settings.fallbacks[0]",
        "code": "conflict",
    }
    provider = operator.call("DELETE", "/catalog/providers/sim-a")
    assert provider.status_code == 409, provider.text
    error = provider.json()["error"]
    uses = [
        f"models.{name}.offers[{i}].provider"
        for name, spec in before["models"].items()
        for i, offer in enumerate(spec["offers"])
        if offer["provider"] == "sim-a"
    ]
    assert (error["type"], error["code"], error["param"]) == ("conflict_error", "conflict", uses[0])
    assert error["message"] == f"provider `sim-a` is still used by: {', '.join(uses)}; remove those first"
    assert operator.call("GET", "/catalog").json() == before


def test_a_provider_added_with_a_sealed_key_serves_and_its_key_is_never_shown(gw: Gateway, operator: Admin) -> None:
    secret = "sk-catalog-added-provider-4f1e9a7c"
    made = operator.call(
        "PUT",
        "/catalog/providers/sim-c",
        {"kind": "openai_compatible", "base_url": f"{gw.sim_url}/v1", "api_key": secret},
    )
    assert made.status_code == 200, made.text
    assert made.json()["providers"]["sim-c"]["api_key"] == {"source": "sealed", "tail": "…9a7c"}
    put = operator.call("PUT", "/catalog/models/on-c", {"offers": [{"provider": "sim-c", "model": "on-c"}]})
    assert put.status_code == 200, put.text
    wait_for(lambda: _everywhere(gw, "on-c", 200, burst=4), BOUND_S, "a model on the new provider")
    sent = gw.sim_log("on-c")
    assert sent and {e["auth_fingerprint"] for e in sent} == {auth_fingerprint(f"Bearer {secret}")}
    assert all(secret not in text for text in operator.seen)
    assert secret not in json.dumps(operator.call("GET", "/catalog").json())


def test_a_provider_never_reads_turnouts_own_variables_nor_points_at_link_local_or_metadata(
    gw: Gateway, operator: Admin, env: dict[str, str]
) -> None:
    """The reported exfiltration: a provider at a listener with `api_key_env: TURNOUT_SECRET_KEY`
    would be sent the vault's key as its bearer token. Refused with a 400 naming the field, as are
    link-local and cloud metadata base URLs; any other variable, and private or loopback hosts, work."""
    before = operator.call("GET", "/catalog").json()
    sim = f"{gw.sim_url}/v1"
    own = "must not name one of Turnout's own variables (TURNOUT_*"
    url = "providers.exfil.base_url"
    refused = [
        ({"base_url": sim, "api_key_env": "TURNOUT_SECRET_KEY"}, "api_key_env", own),
        ({"base_url": sim, "api_key_env": "TURNOUT_OPERATOR_KEY"}, "api_key_env", own),
        ({"base_url": sim, "api_key_env": "turnout_secret_key"}, "api_key_env", own),
        ({"base_url": sim, "api_key_env": "KEY\u00e9"}, "api_key_env", "must be an environment variable name"),
        ({"base_url": "http://169.254.169.254/v1"}, url, "169.254.169.254 is a cloud metadata address"),
        ({"base_url": "http://[fd00:ec2::254]/v1"}, url, "fd00:ec2::254 is a cloud metadata address"),
        ({"base_url": "http://metadata.google.internal/v1"}, url, "metadata.google.internal is a cloud metadata"),
        ({"base_url": "http://169.254.10.1:8000/v1"}, url, "169.254.10.1 is a link-local address"),
        ({"base_url": "http://[fe80::1]:8000/v1"}, url, "fe80::1 is a link-local address"),
    ]
    for fields, param, why in refused:
        answer = operator.call("PUT", "/catalog/providers/exfil", {"kind": "openai_compatible", **fields})
        assert answer.status_code == 400, (fields, answer.text)
        error = answer.json()["error"]
        assert (error["param"], error["code"]) == (param, "invalid_value"), (fields, error)
        assert error["message"].startswith(f"{param}: ") and why in error["message"], (fields, error)
    assert operator.call("GET", "/catalog").json() == before
    assert env["TURNOUT_SECRET_KEY"] not in "".join(operator.seen)

    made = operator.call(
        "PUT",
        "/catalog/providers/mine",
        {"kind": "openai_compatible", "base_url": sim, "api_key_env": "MY_PROVIDER_KEY"},
    )
    assert made.status_code == 200, made.text
    assert made.json()["providers"]["mine"]["api_key"] == {"source": "env", "name": "MY_PROVIDER_KEY"}
    private = operator.call(
        "PUT", "/catalog/providers/private", {"kind": "openai", "base_url": "http://10.0.0.5:8000/v1"}
    )
    assert private.status_code == 200, private.text
    put = operator.call("PUT", "/catalog/models/on-mine", {"offers": [{"provider": "mine", "model": "on-mine"}]})
    assert put.status_code == 200, put.text
    with _client(gw.base_url) as client:  # streamed: served by this ingress, which reads its own writes
        assert _streamed(client, "on-mine") == 200
    assert {e["auth_fingerprint"] for e in gw.sim_log("on-mine")} == {auth_fingerprint(f"Bearer {PROVIDER_KEY}")}
    for path in ("/catalog/models/on-mine", "/catalog/providers/mine", "/catalog/providers/private"):
        assert operator.call("DELETE", path).status_code == 200, path


def test_a_model_write_reprices_the_same_provider_model_in_every_other_model(gw: Gateway, operator: Admin) -> None:
    offer = {"provider": "sim-b", "model": "shared-b", "input_usd_per_mtok": 5, "output_usd_per_mtok": 5}
    for name in ("pa", "pb"):
        assert operator.call("PUT", f"/catalog/models/{name}", {"offers": [offer]}).status_code == 200
    other = {**offer, "input_usd_per_mtok": 3}
    refused = operator.call("PUT", "/catalog/models/pc", {"offers": [offer, {**other, "model": "x"}, other]})
    assert refused.status_code == 400 and "models.pc.offers[0]" in refused.json()["error"]["message"]
    repriced = operator.call("PUT", "/catalog/models/pa", {"offers": [other]})
    assert repriced.status_code == 200, repriced.text
    models = operator.call("GET", "/catalog").json()["models"]
    assert models["pb"]["offers"][0]["input_usd_per_mtok"] == 3  # one provider's model, one price
    for name in ("pa", "pb"):
        assert operator.call("DELETE", f"/catalog/models/{name}").status_code == 200


def test_a_model_an_org_made_through_the_api_names_is_not_deleted_under_it(operator: Admin) -> None:
    assert operator.call("PUT", "/catalog/models/m-refs", {"offers": [{"provider": "sim-a", "model": "x"}]}).is_success
    assert operator.call("POST", "/orgs", {"id": "refs-org"}).status_code == 201
    try:
        patched = operator.call("PATCH", "/orgs/refs-org/settings", {"reroutes": ["m-refs"]})
        assert patched.is_success, patched.text
        refused = operator.call("DELETE", "/catalog/models/m-refs")
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"]["param"] == "orgs.refs-org.settings.reroutes[0]"
        assert operator.call("PATCH", "/orgs/refs-org/settings", {"reroutes": None}).is_success
        assert operator.call("DELETE", "/catalog/models/m-refs").is_success
    finally:
        operator.call("DELETE", "/orgs/refs-org")
        operator.call("DELETE", "/catalog/models/m-refs")


def test_an_api_responses_offer_is_written_and_served_natively_through_the_api(gw: Gateway, operator: Admin) -> None:
    """`api: responses` passes the admin API like the file: written, carried to the same provider
    model's other offers, served on `/v1/responses` at the provider's own `/responses`; on an
    `anthropic` provider it is refused naming the offer."""
    offer = {"provider": "sim-b", "model": "deep-up", "api": "responses"}
    put = operator.call("PUT", "/catalog/models/deep", {"offers": [offer]})
    assert put.status_code == 200, put.text
    assert put.json()["models"]["deep"]["offers"][0]["api"] == "responses"
    wait_for(lambda: _workers_at(gw, put.json()["version"]), BOUND_S, "every worker on the catalog with the model")
    with _client(gw.base_url) as client:
        wait_for(lambda: _queued(client, "deep") == 400, BOUND_S, "a chat request refused by the model")
        answer = client.responses.create(model="deep", input="hi", max_output_tokens=3)
        assert answer.output_text == "tok0 tok1 tok2" and answer.id.startswith("resp_")
    assert json.loads(gw.sim_log("deep-up")[-1]["received"]["body"])["store"] is False  # type: ignore[index]
    made = operator.call(
        "PUT", "/catalog/providers/claude-x", {"kind": "anthropic", "base_url": "https://api.anthropic.com"}
    )
    assert made.status_code == 200, made.text
    refused = operator.call(
        "PUT", "/catalog/models/deep-c", {"offers": [{"provider": "claude-x", "model": "c", "api": "responses"}]}
    )
    assert refused.status_code == 400 and "models.deep-c.offers[0].api" in refused.json()["error"]["message"]
    for path in ("/catalog/models/deep", "/catalog/providers/claude-x"):
        assert operator.call("DELETE", path).status_code == 200, path
