"""Fuzzing the ingress over HTTP: schemathesis from its OpenAPI schema, and
hypothesis with arbitrary JSON and bytes on `/v1/chat/completions`.

FastAPI serves `/openapi.json`, but the chat route reads the raw body (to
bound its size and validate it itself), so the served schema documents no
request body and schemathesis alone can only call each operation as is. The
tests therefore: (1) call every documented operation through schemathesis;
(2) let schemathesis generate positive and negative bodies from a small
OpenAI chat request schema laid over the served one; (3) post hypothesis's
recursive JSON values, chat-shaped objects with arbitrary fields, requests
valid at the door with odd fields inside (these reach the worker and the
provider), and raw bytes. Whatever is sent: never a 5xx, and every error body
is OpenAI-shaped (`{"error": {"message", "type", "param", "code"}}`;
Anthropic-shaped on `/v1/messages`). Bounded: about 200 generated requests in
all, no example database; `TURNOUT_FUZZ_SCALE=10` for a longer local run.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.gateway import ACME_ORG, BREAKER_OFF, Gateway, start_gateway
from support.procs import Fleet, require_redis

HAVE_SCHEMATHESIS = importlib.util.find_spec("schemathesis") is not None
if HAVE_SCHEMATHESIS:  # else the hypothesis tests below still run
    import schemathesis
    from schemathesis.core.result import Err, Ok
    from schemathesis.generation import GenerationMode

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
needs_schemathesis = pytest.mark.skipif(
    not HAVE_SCHEMATHESIS, reason="schemathesis is not installed (pip install -e '.[dev]')"
)


def operation_of(result: Ok[Any] | Err[Any]) -> Any:
    """The operation a schema lookup found (the test fails naming the error if it found none)."""
    assert isinstance(result, Ok), result.err()
    return result.ok()


KEY = "tk-test-fuzz-main-0000001"
ADMIN = "tk-test-fuzz-admin-000001"
MODELS = ["ok", "ok-b"]
ROLES = ["system", "developer", "user", "assistant", "tool", "function"]
CHAT = "/v1/chat/completions"

CONFIG = (
    """\
providers:
  sim-a: {{kind: openai_compatible, base_url: "{sim}/v1", api_key: key-a}}
models:
  ok:   {{offers: [{{provider: sim-a, model: fuzz-ok}}]}}
  ok-b: {{offers: [{{provider: sim-a, model: fuzz-ok-b}}]}}
gateway: {{max_body_bytes: 65536}}
"""
    + BREAKER_OFF
    + ACME_ORG
    + """      - {{name: admin, key: {admin}, admin: true}}
"""
)

_FUZZ = settings(
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


SCALE = float(os.environ.get("TURNOUT_FUZZ_SCALE", "1"))  # e.g. 10 for a longer local run


def fuzz(max_examples: int) -> settings:
    """Settings of every fuzz test here: no deadline, no example database, bounded count."""
    return settings(_FUZZ, max_examples=max(1, int(max_examples * SCALE)))


# A minimal OpenAI chat request, laid over the served schema (which has none).
CHAT_REQUEST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["model", "messages"],
    "properties": {
        "model": {"type": "string", "enum": MODELS},
        "messages": {
            "type": "array",
            "minItems": 1,
            "maxItems": 3,
            "items": {
                "type": "object",
                "required": ["role", "content"],
                "properties": {
                    "role": {"type": "string", "enum": ROLES},
                    "content": {"type": "string", "maxLength": 40},
                },
            },
        },
        "max_tokens": {"type": "integer", "minimum": 1, "maximum": 64},
        "temperature": {"type": "number", "minimum": 0, "maximum": 2},
        "stream": {"type": "boolean"},
    },
}


SEEN: dict[str, Counter[int]] = defaultdict(Counter)  # statuses per generator, printed at the end


@pytest.fixture(scope="module")
def fuzz_gw() -> Iterator[Gateway]:
    require_redis()
    fleet = Fleet()
    try:
        yield start_gateway(fleet, CONFIG, key=KEY, admin=ADMIN)
    finally:
        fleet.stop_all()
        for name, statuses in SEEN.items():
            print(f"\nfuzz {name}: {sum(statuses.values())} requests, statuses {dict(sorted(statuses.items()))}")


@pytest.fixture(scope="module")
def http(fuzz_gw: Gateway) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=fuzz_gw.base_url, timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def served_schema(http: httpx.Client) -> dict[str, Any]:
    response = http.get("/openapi.json")
    assert response.status_code == 200
    schema: dict[str, Any] = response.json()
    return schema


def _last_traceback(gw: Gateway) -> str:
    """The end of the last traceback in the ingress's (JSON) log, or its last lines."""
    proc = next(p for p in gw.fleet.procs if p.name.startswith("ingress"))
    lines = proc.log().splitlines()
    for line in reversed(lines):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("exc_info"):
            return "\n".join(str(record["exc_info"]).splitlines()[-12:])
    return "\n".join(lines[-10:])


def _check(gw: Gateway, response: Any, sent: object, api: str = "openai") -> None:
    """No 5xx; an error answer carries an OpenAI-format body (Anthropic-format under `/v1/messages`)."""
    status = response.status_code
    assert status < 500, (
        f"{status} for {sent!r}\nbody: {response.text[:500]}\n--- ingress traceback\n{_last_traceback(gw)}"
    )
    if status >= 400:
        body = json.loads(response.content)
        assert isinstance(body, dict), response.text[:300]
        error = body.get("error")
        assert isinstance(error, dict), f"{status} without an error object: {response.text[:300]}"
        assert isinstance(error.get("message"), str) and error["message"], error
        assert isinstance(error.get("type"), str) and error["type"], error
        if api == "anthropic":
            assert body.get("type") == "error", f"{status} not Anthropic-shaped: {response.text[:300]}"
        else:
            assert set(body) == {"error"}, f"{status} not OpenAI-shaped: {response.text[:300]}"
            assert "param" in error and "code" in error, error


def test_the_openapi_schema_is_served_and_documents_the_routes(served_schema: dict[str, Any], fuzz_gw: Gateway) -> None:
    paths = served_schema["paths"]
    for path in (CHAT, "/v1/models", "/health/liveness", "/health/readiness", "/metrics"):
        assert path in paths, path
    ingress = next(p for p in fuzz_gw.fleet.procs if p.name.startswith("ingress"))
    assert "Duplicate Operation ID" not in ingress.log(), "each operation has its own id (one route per method)"
    settings_paths = [p for p in paths if p.endswith("/settings")]
    assert settings_paths and all(set(paths[p]) == {"get", "put", "patch"} for p in settings_paths), settings_paths
    # The chat route reads the raw body itself, so FastAPI documents none (the
    # reason for the overlay below); should one appear, the overlay yields to it.
    documented = "requestBody" in paths[CHAT]["post"]
    print(f"\n/openapi.json: {len(paths)} paths; chat request body documented: {documented}")


def _run(gw: Gateway, operation: Any, mode: GenerationMode, max_examples: int, statuses: list[int]) -> None:
    """Call `operation` with up to `max_examples` schemathesis cases of `mode`."""
    key = ADMIN if operation.path.startswith(("/admin", "/v1/health")) else KEY
    strategy = operation.as_strategy(generation_mode=mode, headers={"authorization": f"Bearer {key}"})

    @fuzz(max_examples)
    @given(case=strategy)
    def call(case: Any) -> None:
        response = case.call(base_url=gw.base_url, timeout=30)
        statuses.append(response.status_code)
        sent = {"method": case.method, "path": case.path, "query": case.query, "body": getattr(case, "body", None)}
        _check(gw, response, sent, "anthropic" if operation.path.startswith("/v1/messages") else "openai")

    call()


@needs_schemathesis
def test_schemathesis_calls_every_documented_operation_without_a_server_error(
    fuzz_gw: Gateway, served_schema: dict[str, Any]
) -> None:
    schema = schemathesis.openapi.from_dict(served_schema)
    statuses: list[int] = []
    operations = [operation_of(result) for result in schema.get_all_operations()]
    for operation in operations:
        # no parameters or bodies are documented: one positive case per operation
        _run(fuzz_gw, operation, GenerationMode.POSITIVE, 5, statuses)
    print(
        f"\nschemathesis, served schema: {len(operations)} operations, {len(statuses)} calls, "
        f"statuses {sorted(set(statuses))}"
    )
    assert len(operations) >= 7 and 200 in statuses


@needs_schemathesis
def test_schemathesis_chat_bodies_positive_and_negative(fuzz_gw: Gateway, served_schema: dict[str, Any]) -> None:
    overlaid = copy.deepcopy(served_schema)
    overlaid["paths"] = {CHAT: overlaid["paths"][CHAT]}
    overlaid["paths"][CHAT]["post"].setdefault(
        "requestBody",
        {
            "required": True,
            "content": {"application/json": {"schema": CHAT_REQUEST_SCHEMA}},
        },
    )
    schema = schemathesis.openapi.from_dict(overlaid)
    (operation,) = [operation_of(result) for result in schema.get_all_operations()]
    statuses: list[int] = []
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
        got: list[int] = []
        _run(fuzz_gw, operation, mode, 40, got)
        print(f"\nschemathesis, chat bodies ({mode.value}): {len(got)} calls, statuses {sorted(set(got))}")
        statuses += got
    assert 200 in statuses and any(400 <= s < 500 for s in statuses)


json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)


def _json_containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)


json_values = st.recursive(json_scalars, _json_containers, max_leaves=12)
# Chat-shaped objects first (they get past the outer checks, into the queue,
# the worker and the provider), then anything at all. A role is a known role
# or any JSON value (an array or object role once gave a 500: see the test below).
message = st.fixed_dictionaries(
    {"role": st.sampled_from(ROLES) | json_values},
    optional={"content": st.text(max_size=20) | json_values, "name": json_values, "tool_calls": json_values},
)
chat_shaped = st.fixed_dictionaries(
    {
        "model": st.sampled_from(MODELS) | json_values,
        "messages": st.lists(message | json_values, min_size=1, max_size=3) | json_values,
    },
    optional={
        "stream": st.booleans() | json_values,
        "max_tokens": st.integers() | json_values,
        "n": st.integers() | json_values,
        "temperature": st.floats() | json_values,
        "tools": json_values,
        "response_format": json_values,
        "extra": json_values,
    },
)

# Valid at the gateway's door, odd inside: these are enqueued, run by the
# worker and sent to the (simulated) provider.
accepted_shape = st.fixed_dictionaries(
    {
        "model": st.sampled_from(MODELS),
        "messages": st.lists(
            st.fixed_dictionaries(
                {"role": st.sampled_from(ROLES)},
                optional={
                    "content": st.text(max_size=20) | json_values,
                    "name": json_values,
                    "tool_calls": json_values,
                    "tool_call_id": json_values,
                    "extra": json_values,
                },
            ),
            min_size=1,
            max_size=3,
        ),
    },
    optional={
        "stream": st.booleans(),
        "max_tokens": st.integers(min_value=1, max_value=64),
        "temperature": json_values,
        "stream_options": json_values,
        "tools": json_values,
        "tool_choice": json_values,
        "response_format": json_values,
        "metadata": json_values,
        "user": json_values,
        "extra": json_values,
    },
)


def _post(http: httpx.Client, content: bytes) -> httpx.Response:
    return http.post(
        CHAT,
        content=content,
        headers={"authorization": f"Bearer {KEY}", "content-type": "application/json"},
    )


@fuzz(40)
@given(value=chat_shaped | json_values)
def test_any_json_value_gets_an_openai_shaped_answer_never_a_5xx(
    fuzz_gw: Gateway, http: httpx.Client, value: Any
) -> None:
    content = json.dumps(value).encode()  # allow_nan: NaN / Infinity tokens are invalid JSON, sent as is
    response = _post(http, content)
    SEEN["json"][response.status_code] += 1
    _check(fuzz_gw, response, content)


@fuzz(40)
@given(value=accepted_shape)
def test_odd_fields_in_an_accepted_request_never_make_a_5xx(fuzz_gw: Gateway, http: httpx.Client, value: Any) -> None:
    content = json.dumps(value).encode()
    response = _post(http, content)
    SEEN["accepted-shape"][response.status_code] += 1
    _check(fuzz_gw, response, content)
    if response.status_code == 200 and not value.get("stream"):
        assert response.json()["choices"]


@fuzz(30)
@given(raw=st.binary(max_size=256))
def test_any_bytes_get_an_openai_shaped_answer_never_a_5xx(fuzz_gw: Gateway, http: httpx.Client, raw: bytes) -> None:
    response = _post(http, raw)
    SEEN["bytes"][response.status_code] += 1
    _check(fuzz_gw, response, raw)


@pytest.mark.parametrize("role", [[], ["user"], {}, {"a": 1}])
def test_an_array_or_object_role_is_a_400_not_a_500(fuzz_gw: Gateway, http: httpx.Client, role: object) -> None:
    content = json.dumps({"model": "ok", "messages": [{"role": role, "content": "hi"}]}).encode()
    response = _post(http, content)
    _check(fuzz_gw, response, content)
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "messages[0].role"
